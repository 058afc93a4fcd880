"""Pack the appearance recipe's training data small enough to travel to a lent accelerator.

A device run (docs/appearance.md, "On a lent GPU") receives the repository and the paths it names
in ``carry``, 64 MiB together; the repository itself is ~34 MiB. The re-id manifests' crops
(``minterpr data reid``) are ~50 MiB as stored (CUHK03's train and val 20.8, PETA's 29.1), so the
pack takes the identities of the namespaces asked for (``--namespace cuhk03``: CUHK03's 767
training and val identities, the field's CUHK03-NP training set, ~25 MiB with the weights).
It writes one folder:

- ``images.zip``: every crop of those identities, stored uncompressed in one file (15,000 small
  files would cost a block each on the way), **as their original bytes**: re-encoding costs
  accuracy on crops this small (the shipped model's CUHK03 val rank-1, 83.4 on the originals, is
  80.9 after WebP at quality 90 and 75.4 at 65; JPEG at 90 keeps 83.4 at 1.35x the bytes). A crop
  larger than ``--max-size`` (the recipe's 256x128) is shrunk keeping its shape and stored as
  JPEG at quality 95; ``--webp Q`` re-encodes every crop (smaller, at that cost);
- the manifests, same names, only the kept identities, with paths relative to the folder
  (``images/000123.jpg``, there once the zip is unpacked beside them: ``python -m zipfile -e
  images.zip PACK``, which ``device_reid.sh`` does);
- ``weights.pth``, a copy of ``--weights`` (the starting weights; their research terms travel with them);
- ``pack.json``: what went in (each manifest's SHA-256 and kept crops, the weights' SHA-256), the
  bytes and the settings, so a run trained on the pack names its data.

It refuses to write more than ``--budget-mib``, every file counted (nothing is left half written:
the folder is built beside the target and renamed). The pack is data, not code: keep it out of git
(``echo /device_pack/ >> "$(git rev-parse --git-path info/exclude)"``) and name it in the device
call's ``carry``.

    python benchmarks/device_pack_reid.py --manifests data/reid/train.jsonl data/reid/val.jsonl \\
        --namespace cuhk03 --weights ../shared/weights/osnet_x0_25_msmt17.pth --out device_pack/reid
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
import zipfile
from pathlib import Path

SHRUNK_QUALITY = 95  # JPEG quality of a crop shrunk to --max-size (rare: the trainer shrinks it anyway)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _store(source: str, target: Path, max_size: tuple[int, int], webp: int | None) -> Path:
    """``source`` into ``target`` (its suffix chosen here): the bytes as they are unless the crop is
    larger than ``max_size`` or ``webp`` asks for re-encoding; every crop is decoded once to check it."""
    from PIL import Image

    from minterpr.data.images import load_rgb

    picture = load_rgb(source)  # an unreadable crop fails here, named
    height, width = max_size
    if webp is not None or picture.height > height or picture.width > width:
        picture.thumbnail((width, height), Image.BILINEAR)  # keeps the shape; no-op when it fits
        if webp is not None:
            picture.save(target.with_suffix(".webp"), "WEBP", quality=webp, method=4)
            return target.with_suffix(".webp")
        picture.save(target.with_suffix(".jpg"), "JPEG", quality=SHRUNK_QUALITY)
        return target.with_suffix(".jpg")
    target = target.with_suffix(Path(source).suffix.lower() or ".img")
    shutil.copyfile(source, target)
    return target


def pack(
    manifests: list[Path],
    out: Path,
    *,
    weights: Path | None,
    namespaces: list[str] | None,
    max_size: tuple[int, int],
    webp: int | None,
    budget_mib: float,
) -> dict:
    """Write the pack to ``out`` (see the module doc); its ``pack.json`` record."""
    from minterpr.data.reid import ReidImage, read_manifest, write_manifest
    from minterpr.errors import InputError

    if out.exists():
        raise InputError(f"{out} already exists: name a new folder (a pack is written once)")
    names = [m.name for m in manifests]
    if len(set(names)) != len(names):
        raise InputError(f"two manifests share a file name ({', '.join(names)}): the pack keeps their names")
    read = {m: read_manifest(m) for m in manifests}  # every error before any work, naming file and line
    if namespaces:
        read = {m: [i for i in images if i.person_id.split(":")[0] in namespaces] for m, images in read.items()}
        for manifest, images in read.items():
            if not images:
                raise InputError(f"{manifest}: no identity in namespace {', '.join(namespaces)}")
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "images").mkdir(parents=True)
    budget = int(budget_mib * 2**20)
    stored: dict[str, str] = {}  # source path -> path in the pack
    total = 0
    try:
        for manifest, images in read.items():
            moved = []
            for image in images:
                if image.path not in stored:
                    file = _store(image.path, staging / "images" / f"{len(stored):06d}", max_size, webp)
                    total += file.stat().st_size
                    if total > budget:
                        raise InputError(
                            f"the pack passes --budget-mib {budget_mib:g} after {len(stored) + 1} crops: "
                            "keep fewer identities (--namespace) or re-encode them (--webp, at an accuracy cost)"
                        )
                    stored[image.path] = f"images/{file.name}"
                moved.append(ReidImage(stored[image.path], image.person_id, image.camera))
            write_manifest(moved, staging / manifest.name)
        with zipfile.ZipFile(staging / "images.zip", "w", zipfile.ZIP_STORED) as archive:
            for name in stored.values():
                archive.write(staging / name, name)
        shutil.rmtree(staging / "images")
        if weights is not None:
            shutil.copyfile(weights, staging / "weights.pth")
        total = sum(f.stat().st_size for f in staging.iterdir())
        if total > budget:  # everything that travels: the zip (its headers ~100 bytes a crop), manifests, weights
            raise InputError(f"the pack passes --budget-mib {budget_mib:g} with its manifests and weights")
        record = {
            "manifests": {m.name: {"source": str(m), "sha256": sha256(m), "crops": len(read[m])} for m in manifests},
            "namespaces": namespaces or "all",
            "weights": None if weights is None else {"source": str(weights), "sha256": sha256(weights)},
            "crops": len(stored),
            "bytes": total,
            "encoding": "original bytes" if webp is None else f"webp {webp}",
            "max_size": list(max_size),
        }
        (staging / "pack.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifests", nargs="+", required=True, help="re-id manifests (minterpr data reid)")
    parser.add_argument("--out", required=True, help="the pack folder to write (must not exist)")
    parser.add_argument("--weights", help="starting weights to travel with the data (a torchreid OSNet file)")
    parser.add_argument(
        "--namespace", action="append", help="keep only these identity namespaces (cuhk03, peta-grid, ...; repeatable)"
    )
    parser.add_argument("--max-size", default="256x128", help="largest stored crop, HxW (default 256x128)")
    parser.add_argument("--webp", type=int, metavar="Q", help="re-encode every crop as WebP at quality Q (1-100)")
    parser.add_argument(
        "--budget-mib", type=float, default=29.0, help="most MiB the pack may hold, every file counted (default 29)"
    )
    args = parser.parse_args(argv)
    from minterpr.errors import MinterprError

    try:
        height, width = (int(v) for v in args.max_size.lower().split("x"))
        bad_webp = args.webp is not None and not 1 <= args.webp <= 100
        if height < 1 or width < 1 or bad_webp or args.budget_mib <= 0:
            raise ValueError
    except ValueError:
        print(
            f"device_pack_reid: --max-size must be HxW (got {args.max_size!r}), --webp 1-100 "
            f"(got {args.webp}), --budget-mib above 0 (got {args.budget_mib})",
            file=sys.stderr,
        )
        return 2
    weights = None if args.weights is None else Path(args.weights)
    if weights is not None and not weights.is_file():
        print(f"device_pack_reid: {weights}: no such file (--weights)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        record = pack(
            [Path(m) for m in args.manifests],
            Path(args.out),
            weights=weights,
            namespaces=args.namespace,
            max_size=(height, width),
            webp=args.webp,
            budget_mib=args.budget_mib,
        )
    except (MinterprError, OSError) as err:
        print(f"device_pack_reid: {err}", file=sys.stderr)
        return 2
    print(
        f"{args.out}: {record['crops']} crops ({record['encoding']}), {record['bytes'] / 2**20:.1f} MiB, "
        f"{time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
