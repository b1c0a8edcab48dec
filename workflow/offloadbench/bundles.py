"""Bundles: one machine's results in one file, to carry back from a cluster node or a lab
GPU box and compare or re-render elsewhere. A bundle holds the raw records, the rounds,
the copy sweep and roofs, environment.json, the tables with the judging policy they were judged
with, and the config of the run; not the
figures or reports, which are rebuilt from the records without torch.

Also where the sources of a comparison are found: a machine label of this run or under
results/, a results folder anywhere, or a bundle.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError, shown
from .layout import COMPILE_CACHE_DIR, PARTIAL_DIR
from .machine import LABEL_RULE, is_label
from .reading import UnreadableFile, read_regular

BUNDLE_SUFFIX = ".tar.gz"
# Bounds on what unpacking a bundle from elsewhere may write (config key bundle_limits).
DEFAULT_MAX_UNPACKED_MB = 2048
DEFAULT_MAX_MEMBERS = 100_000
DEFAULT_MAX_SAMPLES = 1_000_000
UNBOUNDED_SAMPLES = 2**62  # this run's own results, which no budget of results from elsewhere refuses
MAX_MEMBER_BYTES = 64 * 2**20  # records.MAX_JSON_BYTES: no file a reader takes is larger
# A bundle's deepest file is <label>/raw/<op>/<cell>/p<k>.json; far deeper folders only
# serve to exhaust whatever walks them (os.makedirs recurses once per level).
MAX_DEPTH = 16
# Written into a folder unpacked from a bundle: what it came from, so that a message about
# it names the bundle and gives advice that fits one (make it again, not measure again).
UNPACKED_FROM = ".offloadbench-bundle"


class BundleError(UserError):
    """A bundle that cannot be made or unpacked; the message is one line."""


def bundle_members(folder: Path) -> list[Path]:
    """The files of a results folder that go into its bundle."""
    members = [p for p in (folder / "environment.json", folder / "judging.json") if p.exists()]
    members += sorted(folder.glob("*.csv"))
    members += sorted(
        p for p in (folder / "raw").rglob("*.json")
        if not {PARTIAL_DIR, COMPILE_CACHE_DIR} & set(p.relative_to(folder).parts)  # an unfinished round; caches
    )
    return members


def make_bundle(folder: Path, out: Path, label: str, config_text: str) -> int:
    """Write `out` (a .tar.gz) with the results of `folder` under `<label>/`; returns the
    number of files. Written atomically: a reader never sees half a bundle."""
    members = bundle_members(folder)
    if not (folder / "environment.json").exists():
        raise BundleError(f"{folder}: no environment.json, so no results to bundle")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            for path in members:
                tar.add(path, arcname=f"{label}/{path.relative_to(folder)}", recursive=False)
            data = config_text.encode("utf-8")
            info = tarfile.TarInfo(f"{label}/config.yaml")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(members) + 1


def unpack(bundle: Path, dest: Path, max_unpacked_mb: float = DEFAULT_MAX_UNPACKED_MB,
           max_members: int = DEFAULT_MAX_MEMBERS) -> Path:
    """Unpack a bundle into `dest` (its results folder), refusing paths that leave it and
    bundles beyond the bounds; the folder appears whole or not at all."""
    try:
        with tarfile.open(bundle, "r:gz") as tar:
            members = _bounded_members(tar, bundle, int(max_unpacked_mb * 2**20), max_members)
            return _unpack_into(tar, members, bundle, dest)
    except (OSError, tarfile.TarError, EOFError, zlib.error) as error:
        raise BundleError(f"bundle {shown(bundle)}: not a readable bundle ({str(error).splitlines()[0][:200]})") from None


def _bounded_members(tar: tarfile.TarFile, bundle: Path, max_bytes: int, max_members: int) -> list[tarfile.TarInfo]:
    """The bundle's members, read one by one and refused as soon as a bound is passed:
    a small bundle may not unpack into an unbounded folder."""
    members, total = [], 0
    for member in tar:
        members.append(member)
        total += max(member.size, 0)
        if not member.name.isprintable():
            raise BundleError(f"bundle {shown(bundle)}: refusing {member.name!r}: a name with control characters")
        if member.name.count("/") >= MAX_DEPTH:
            raise BundleError(f"bundle {shown(bundle)}: {shown(member.name[:60] + '…')} is nested "
                              f"{member.name.count('/') + 1} folders deep, over the {MAX_DEPTH} a bundle may have")
        if len(members) > max_members:
            raise BundleError(f"bundle {shown(bundle)}: more than {max_members} files; bundle_limits.max_members allows no more")
        if member.size > MAX_MEMBER_BYTES:
            raise BundleError(f"bundle {shown(bundle)}: {member.name!r} unpacks to {member.size / 2**20:.0f} MiB, over the "
                              f"{MAX_MEMBER_BYTES // 2**20} MiB any file of a bundle may hold")
        if total > max_bytes:
            raise BundleError(f"bundle {shown(bundle)}: unpacks to more than {max_bytes / 2**20:.0f} MiB; "
                              "bundle_limits.max_unpacked_mb allows no more")
    return members


def _unpack_into(tar: tarfile.TarFile, members: list[tarfile.TarInfo], bundle: Path, dest: Path) -> Path:
    tops = {m.name.split("/", 1)[0] for m in members}
    top = next(iter(tops)) if len(tops) == 1 else None
    environment = next((m for m in members if m.name == f"{top}/environment.json"), None)
    if top in (None, "", ".", "..") or environment is None or not environment.isfile():
        raise BundleError(f"bundle {shown(bundle)}: not an offloadbench bundle (expected one folder with environment.json at its top)")
    for member in members:
        target = (dest / member.name).resolve()
        if not (member.isfile() or member.isdir()) or dest.resolve() not in target.parents:
            raise BundleError(f"bundle {shown(bundle)}: refusing {member.name!r}, which would land outside {dest}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        tar.extractall(staging, members=members, filter="data")
        (staging / top / UNPACKED_FROM).write_text(str(bundle), encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(staging / top, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def unpacked_from(folder: Path) -> str | None:
    """The bundle a results folder was unpacked from, or None for a folder of results."""
    mark = Path(folder) / UNPACKED_FROM
    if not mark.exists() and not mark.is_symlink():
        return None
    try:
        return read_regular(mark, 4096).decode("utf-8", "replace").strip() or str(folder)
    except UnreadableFile:
        return str(folder)


def content_digest(path: Path) -> str:
    """SHA-256 of a bundle: what makes Snakemake unpack it again when its content changes,
    whatever its mtime (scp -p and rsync -a keep an older one)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def source_label(name: str, where: str) -> str:
    """A folder's or bundle's name as a machine label, or one line saying what a label may be."""
    if not is_label(name):
        raise BundleError(f"{where}: {name!r} cannot be a machine label ({LABEL_RULE}); rename the folder or bundle")
    return name


@dataclass(frozen=True)
class SourceSpec:
    """Where a compared or rendered machine's results come from."""

    label: str
    folder: Path  # where its results are (for a bundle: where it is unpacked)
    bundle: Path | None = None
    measured_here: bool = False  # produced by this run's own jobs


def resolve_sources(entries: list[str], results_dir: str, machines: list[str], key: str) -> list[SourceSpec]:
    """Turn config entries into sources; one line names the entry that is wrong."""
    specs = []
    for i, entry in enumerate(entries):
        where = f"config key {key}[{i}]"
        path = Path(entry)
        if entry in machines:
            specs.append(SourceSpec(entry, Path(results_dir) / entry, measured_here=True))
        elif entry.endswith(BUNDLE_SUFFIX):
            if not path.is_file():
                raise BundleError(f"{where}: no bundle {entry!r}")
            label = source_label(path.name[: -len(BUNDLE_SUFFIX)], where)
            specs.append(SourceSpec(label, Path(results_dir) / "sources" / label, bundle=path))
        elif (path / "environment.json").is_file():
            specs.append(SourceSpec(source_label(path.resolve().name, where), path))
        elif (Path(results_dir) / entry / "environment.json").is_file():
            specs.append(SourceSpec(entry, Path(results_dir) / entry))
        else:
            raise BundleError(
                f"{where}: {entry!r} is neither a machine of this run, nor results/{entry}/, nor a results "
                f"folder with environment.json, nor a {BUNDLE_SUFFIX} bundle"
            )
    labels = [s.label for s in specs]
    for label in labels:
        if labels.count(label) > 1:
            raise BundleError(f"config key {key}: the label {label!r} is given twice; name each machine once")
    return specs


def main(argv: list[str] | None = None) -> int:
    """`python -m offloadbench.bundles make <folder> <out> <label> <config as JSON> [log]`
    or `python -m offloadbench.bundles unpack <bundle> <dest> <max MB> <max files> [log]`."""
    import sys

    from .logs import run_logged

    args = sys.argv[1:] if argv is None else argv
    if len(args) < 5 or args[0] not in ("make", "unpack"):
        print(main.__doc__, file=sys.stderr)
        return 2
    log = args[5] if len(args) > 5 else None
    if args[0] == "unpack":
        run_logged(log, lambda: unpack(Path(args[1]), Path(args[2]), float(args[3]), int(args[4])))
    else:
        import json

        import yaml

        config_text = yaml.safe_dump(json.loads(args[4]), sort_keys=True)
        run_logged(log, lambda: make_bundle(Path(args[1]), Path(args[2]), args[3], config_text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
