"""Screenshots of the search page for the README and docs/web.md (docs/images/web_*.png).

Starts the service on a free loopback port over a synthetic gallery and lets a simulated witness
search for one person of it in Debian's chromium (Playwright, never ``playwright install``): the
description, answers and corrections are written from the person's true attributes by the
dialogue synthesiser (:mod:`minterpr.language.utterances`), and the witness confirms the person once
a result shows them. Saved at a laptop's 1366 px width:

* ``web_search.png``: the results of the description, with thumbnails, camera, time, the facts each
  result matches or contradicts, and the system's next move;
* ``web_question.png``: the system's question with its quick answers (when it asks one);
* ``web_confirm.png``: the explicit confirmation step on one result;
* ``web_confirmed.png``: the confirmed match, shown as similarity, with its export button;
* ``web_look.png``: looking closely at the top result beside the next one, each with the frame it
  was cut from and its box (the gallery's crops come with synthetic frames).

With ``--fixes``, the page where it once failed a new user (issue 38), over a gallery whose people are
tracks, instead: ``web_correction.png`` (a correction replacing the fact it corrects, struck through),
``web_unsure.png`` (hedged feedback read as unsure, and the images ruled out listed last),
``web_track.png`` (a confirmed crop's track mates say so) and ``web_zoom.png`` (looking closely, zoomed).

With ``--follow``, ``web_follow.png`` only: the "Follow this person" panel after a confirmation (issue 36),
over a gallery with appearance vectors of a freshly initialised tiny appearance model with a steep
same-person calibration (the panel is the real one; its probabilities illustrate, they measure nothing).

With ``--ingest``, the ingestion page (issue 38) instead: ``web_ingest.png``, an admin's form (the
model list with the shipped model preselected, the detectors and their settings) and the jobs table
at 1366 px after a job ingested a folder of the gallery's crops.

The gallery: a trained run (``--run``; by default ``outputs/demo/run`` once ``minterpr demo`` made it)
embeds ``--identities`` synthetic people x 3 views; without one a freshly initialised tiny model does
(the page is the same, but its rankings and attribute guesses are random: use a trained run).

Usage:
    python benchmarks/screenshots_web.py [--run outputs/demo/run] [--out docs/images] [--fixes | --follow | --ingest]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.web import (
    Server,
    build_gallery,
    chromium_path,
    login,
    open_case_and_search,  # noqa: E402
    prepare_service,
    tiny_appearance,
)

SIZE = (256, 128)  # crop (height, width), as the demo model sees them
TURNS = 8  # most moves before the witness gives up looking for the person


def shoot(base: str, out: Path, chromium: str, truth: list[dict], target: int, seed: int = 0) -> list[Path]:
    """Search ``base`` for identity ``target`` (``truth`` from the gallery build); returns the PNGs saved."""
    from playwright.sync_api import expect, sync_playwright

    from minterpr.language.utterances import answer, choose_description_slots, description, feedback

    rng = random.Random(seed)
    person = next(t["attributes"] for t in truth if t["identity"] == target)
    saved: list[Path] = []
    expect.set_options(timeout=180_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.set_default_timeout(180_000)  # the first page loads the model

        def save(name: str, **options) -> None:
            page.wait_for_function(
                "() => [...document.images].filter(i => i.getBoundingClientRect().top < innerHeight)"
                ".every(i => i.complete)"
            )
            saved.append(out / name)
            page.screenshot(path=saved[-1], **options)

        def cards() -> list[tuple[int, object]]:
            found = page.locator("section[aria-labelledby=results-title] li.result").all()
            return [(int(card.get_attribute("id").split("-")[1]), card) for card in found]

        def submit(button) -> None:
            turns = page.locator("ol.timeline > li").count()
            button.click()
            expect(page.locator("ol.timeline > li")).to_have_count(turns + 1)

        login(page, base)
        open_case_and_search(page, base, "Missing person, Central station")
        said = description(person, choose_description_slots(person, rng, max_slots=5), rng, vague_rate=0.0).text
        page.get_by_role("textbox", name="Describe the person you are looking for").fill(said)
        submit(page.get_by_role("button", name="Search"))
        save("web_search.png", full_page=True, clip={"x": 0, "y": 0, "width": 1366, "height": 1100})
        saved.append(out / "web_chips.png")  # what the system understood, as removable chips
        page.locator("section[aria-labelledby=timeline-title]").screenshot(path=saved[-1])
        page.locator("figure.strip").scroll_into_view_if_needed()
        saved.append(out / "web_strip.png")  # the results by camera along time
        page.locator("figure.strip").screenshot(path=saved[-1])
        search_url = page.url
        page.goto(f"{search_url.split('?')[0]}/look/{cards()[0][0]}")
        page.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
        save("web_look.png")
        page.goto(search_url)
        asked = False
        for _ in range(TURNS):
            shown = cards()
            if any(truth[i]["identity"] == target for i, _ in shown[:1]):
                break
            ask = page.locator("section.ask[data-slot]")
            if ask.count():
                if not asked:
                    ask.scroll_into_view_if_needed()
                    save("web_question.png")
                    asked = True
                page.get_by_label("Your answer").fill(answer(ask.get_attribute("data-slot"), person, rng).text)
                submit(page.get_by_role("button", name="Answer", exact=True))
                continue
            i, card = next((i, c) for i, c in shown if truth[i]["identity"] != target and c.locator("details").count())
            card.get_by_text("Not this person…").click()
            card.get_by_label("Because… (how the person you seek differs)").fill(
                feedback(person, truth[i]["attributes"], rng).text
            )
            submit(card.get_by_role("button", name=re.compile("Rule out")))
        i, card = next(((i, c) for i, c in cards() if truth[i]["identity"] == target), cards()[0])
        card.get_by_text("This is the person…").click()
        card.get_by_role("checkbox").check()
        card.scroll_into_view_if_needed()
        save("web_confirm.png")
        submit(card.get_by_role("button", name="Confirm match"))
        with page.expect_download():
            page.get_by_role("button", name="Export the confirmed match (zip)").click()
        expect(page.locator("#exports")).to_be_visible()
        page.evaluate("() => window.scrollTo(0, 0)")
        save("web_confirmed.png")
        browser.close()
    return saved


def shoot_fixes(base: str, out: Path, chromium: str) -> list[Path]:
    """The issue 38 screenshots (see the module doc); returns the PNGs saved."""
    from playwright.sync_api import expect, sync_playwright

    saved: list[Path] = []
    expect.set_options(timeout=180_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.set_default_timeout(180_000)
        turns = page.locator("ol.timeline > li")

        def say(text: str, first: bool = False) -> None:
            count = turns.count()
            name = "Describe the person you are looking for" if first else "Add to the description"
            page.get_by_role("textbox", name=name).fill(text)
            page.get_by_role("button", name="Search" if first else "Add", exact=True).click()
            expect(turns).to_have_count(count + 1)
            page.wait_for_load_state("networkidle")

        def judge(card, text: str) -> None:
            count = turns.count()
            card.get_by_text("Not this person…").click()
            card.get_by_label("Because… (how the person you seek differs)").fill(text)
            card.get_by_role("button", name=re.compile("Rule out")).click()
            expect(turns).to_have_count(count + 1)
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(1500)  # the swap settled (htmx's settle delay, focus) before the next move

        def card_ids() -> list[str]:
            return [
                c.get_attribute("id") for c in page.locator("section[aria-labelledby=results-title] li.result").all()
            ]

        login(page, base)
        open_case_and_search(page, base, "Missing person, Central station")
        say("a woman in a pink top and black trousers", first=True)
        say("it was red, not pink")
        saved.append(out / "web_correction.png")
        page.locator("section[aria-labelledby=timeline-title]").screenshot(path=saved[-1])
        first = card_ids()[0]
        judge(page.locator(f"#{first}"), "could be, I can't tell")
        second = next(c for c in card_ids() if c != first)
        judge(
            page.locator(f"#{second}"),
            "not him, that's a man in a brown jacket and jeans - she had a light blue coat with a white hood",
        )
        page.evaluate("() => window.scrollTo(0, 0)")
        saved.append(out / "web_unsure.png")
        page.screenshot(path=saved[-1], full_page=True, clip={"x": 0, "y": 0, "width": 1366, "height": 1500})
        page.locator("#" + card_ids()[0]).get_by_text("This is the person…").click()
        card = page.locator("#" + card_ids()[0])
        card.get_by_role("checkbox").check()
        count = turns.count()
        card.get_by_role("button", name="Confirm match").click()
        expect(turns).to_have_count(count + 1)
        mate = page.locator("li.result:has(.badge.track)").first
        if mate.count():
            mate.scroll_into_view_if_needed()
            saved.append(out / "web_track.png")
            page.screenshot(path=saved[-1])
        page.goto(f"{page.url.split('?')[0]}/look/{card_ids()[0].split('-')[1]}")
        page.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
        page.get_by_role("button", name=re.compile(r"^Zoom in: This image \(the frame\)")).click()
        page.evaluate("() => window.scrollTo(0, 0)")
        saved.append(out / "web_zoom.png")
        page.screenshot(path=saved[-1], full_page=True, clip={"x": 0, "y": 0, "width": 1366, "height": 1250})
        browser.close()
    return saved


def shoot_follow(base: str, out: Path, chromium: str) -> list[Path]:
    """``web_follow.png``: a confirmed result, then the "Follow this person" lanes, one candidate confirmed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.set_default_timeout(120_000)  # a busy machine: every wait ends as soon as the page is ready
        login(page, base)
        open_case_and_search(page, base)
        page.get_by_role("textbox", name="Describe the person you are looking for").fill("a man in a dark coat")
        page.get_by_role("button", name="Search").click()
        page.locator("#results-title").wait_for()
        card = page.locator("section[aria-labelledby=results-title] li.result").first
        card.get_by_text("This is the person…").click()
        card.get_by_role("checkbox", name=re.compile("I compared this image")).check()
        card.get_by_role("button", name="Confirm match").click()
        first = page.locator("section.follow li.candidate").first
        first.wait_for()
        candidate = first.get_attribute("id")
        first.get_by_text("Same person…").click()
        first.get_by_role("checkbox").check()
        first.get_by_role("button", name="Confirm this crop").click()
        page.locator(f"#{candidate}.confirmed").wait_for()
        page.locator("section.follow li.candidate:not(.confirmed)").first.get_by_text("Same person…").click()
        saved = out / "web_follow.png"
        page.locator("section.follow").screenshot(path=saved)
        browser.close()
    return [saved]


def shoot_ingest(base: str, out: Path, chromium: str, run: Path, incoming: Path) -> list[Path]:
    """The admin's ingestion page: a folder of crops ingested with the run chosen from the model list."""
    import re

    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=180_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.set_default_timeout(180_000)
        login(page, base, ADMIN)
        page.goto(base + "/ingest")
        page.get_by_label("Gallery", exact=False).first.fill("lobby")
        page.get_by_label("Source on the server").fill(str(incoming))
        page.get_by_role("combobox", name=re.compile("^Model")).select_option(str(run))
        page.get_by_label("Camera").fill("lobby:cam1")
        page.get_by_label("HOG (built in)").check()
        page.get_by_role("button", name="Start ingestion").click()
        page.wait_for_url(base + "/ingest")
        expect(page.locator("#ingest-jobs tr[data-job]")).to_have_attribute("data-status", "done")
        page.get_by_role("combobox", name=re.compile("^Model")).select_option(index=0)  # as a new job would start
        page.get_by_label("automatic (YOLOX-nano when fetched, else HOG)").check()
        saved = [out / "web_ingest.png"]
        page.screenshot(path=saved[0], full_page=True)
        browser.close()
    return saved


ADMIN = "ada"  # the admin --ingest makes (the shared web users are an analyst and a viewer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_run = ROOT / "outputs" / "demo" / "run"
    parser.add_argument(
        "--run",
        type=Path,
        default=default_run if (default_run / "model.pt").is_file() else None,
        help="a trained run directory (default: outputs/demo/run when `minterpr demo` made it, "
        "else an untrained tiny model)",
    )
    parser.add_argument("--identities", type=int, default=30, help="people in the synthetic gallery (3 views each)")
    parser.add_argument("--target", type=int, default=4, help="the person the witness looks for")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="where the PNGs go")
    parser.add_argument("--fixes", action="store_true", help="only the issue 38 screenshots (a gallery of tracks)")
    parser.add_argument("--follow", action="store_true", help="only the issue 36 screenshot (follow this person)")
    parser.add_argument("--ingest", action="store_true", help="only the ingestion page (web_ingest.png)")
    args = parser.parse_args(argv)
    chromium = chromium_path()
    if chromium is None:
        print("chromium is not installed: apt-get install chromium", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="minterpr_shots_") as tmp:
        folder = Path(tmp)
        # an untrained tiny model gets the test suite's calibration record, so the marks show (illustration only)
        looks = tiny_appearance(folder) if args.follow else None
        run, store, truth = build_gallery(
            folder,
            identities=args.identities,
            run=args.run,
            size=SIZE,
            calibrated=args.run is None,
            frames=True,
            tracks=args.fixes,
            appearance=looks,
        )
        prepare_service(folder / "data", run, store)
        if args.ingest:  # an admin, and the gallery's crops where the service may read them
            import shutil

            from support.web import PASSWORD
            from minterpr.serving.service import build_services
            from minterpr.serving.settings import ServeSettings

            services = build_services(ServeSettings(data_dir=folder / "data"))
            try:
                services.accounts.create_user(ADMIN, PASSWORD, "admin")
                incoming = services.settings.incoming_dir / "lobby"
            finally:
                services.close()
            shutil.copytree(folder / "crops", incoming)
        server = Server(folder / "data", appearance=looks).start()
        try:
            if args.ingest:
                shots = shoot_ingest(server.url, args.out, chromium, run, incoming)
            else:
                shots = (
                    shoot_follow(server.url, args.out, chromium)
                    if args.follow
                    else shoot_fixes(server.url, args.out, chromium)
                    if args.fixes
                    else shoot(server.url, args.out, chromium, truth, args.target)
                )
            for path in shots:
                print(path)
        except Exception:
            print(server.log.read_text()[-4000:], file=sys.stderr)  # what the server said, for the failure
            raise
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
