CREATE TABLE users (
	id INTEGER NOT NULL, 
	username VARCHAR(64) NOT NULL, 
	password_hash VARCHAR(256) NOT NULL, 
	role VARCHAR(16) NOT NULL, 
	created FLOAT NOT NULL, 
	disabled BOOLEAN NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (username)
);
CREATE TABLE galleries (
	id INTEGER NOT NULL, 
	name VARCHAR(64) NOT NULL, 
	directory TEXT NOT NULL, 
	run_dir TEXT NOT NULL, 
	created FLOAT NOT NULL, 
	version INTEGER NOT NULL, 
	managed BOOLEAN NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name)
);
CREATE TABLE audit_log (
	seq INTEGER NOT NULL, 
	time VARCHAR(40) NOT NULL, 
	user VARCHAR(64), 
	action VARCHAR(32) NOT NULL, 
	case_id INTEGER, 
	details TEXT NOT NULL, 
	prev_hash VARCHAR(64) NOT NULL, 
	hash VARCHAR(64) NOT NULL, 
	PRIMARY KEY (seq)
);
CREATE TABLE ingest_jobs (
	id VARCHAR(32) NOT NULL, 
	gallery VARCHAR(64) NOT NULL, 
	source TEXT NOT NULL, 
	options JSON NOT NULL, 
	user_id INTEGER NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	progress JSON NOT NULL, 
	message TEXT NOT NULL, 
	created FLOAT NOT NULL, 
	updated FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE api_keys (
	id INTEGER NOT NULL, 
	user_id INTEGER NOT NULL, 
	name VARCHAR(100) NOT NULL, 
	key_hash VARCHAR(64) NOT NULL, 
	prefix VARCHAR(16) NOT NULL, 
	created FLOAT NOT NULL, 
	revoked BOOLEAN NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(user_id) REFERENCES users (id), 
	UNIQUE (key_hash)
);
CREATE TABLE logins (
	id INTEGER NOT NULL, 
	user_id INTEGER NOT NULL, 
	token_hash VARCHAR(64) NOT NULL, 
	csrf_token VARCHAR(64) NOT NULL, 
	created FLOAT NOT NULL, 
	expires FLOAT NOT NULL, 
	revoked BOOLEAN NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(user_id) REFERENCES users (id), 
	UNIQUE (token_hash)
);
CREATE TABLE cases (
	id INTEGER NOT NULL, 
	title TEXT NOT NULL, 
	purpose TEXT NOT NULL, 
	cameras JSON, 
	start FLOAT, 
	"end" FLOAT, 
	created_by INTEGER NOT NULL, 
	created FLOAT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(created_by) REFERENCES users (id)
);
CREATE TABLE sessions (
	id VARCHAR(32) NOT NULL, 
	case_id INTEGER NOT NULL, 
	gallery_id INTEGER NOT NULL, 
	user_id INTEGER NOT NULL, 
	created FLOAT NOT NULL, 
	updated FLOAT NOT NULL, 
	filters JSON NOT NULL, 
	options JSON NOT NULL, 
	seq INTEGER NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(case_id) REFERENCES cases (id), 
	FOREIGN KEY(gallery_id) REFERENCES galleries (id), 
	FOREIGN KEY(user_id) REFERENCES users (id)
);
CREATE TABLE session_events (
	id INTEGER NOT NULL, 
	session_id VARCHAR(32) NOT NULL, 
	seq INTEGER NOT NULL, 
	time FLOAT NOT NULL, 
	user_id INTEGER NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	payload JSON NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (session_id, seq), 
	FOREIGN KEY(session_id) REFERENCES sessions (id) ON DELETE CASCADE
);
CREATE INDEX ix_session_events_session_id ON session_events (session_id);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit_log BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit_log BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
