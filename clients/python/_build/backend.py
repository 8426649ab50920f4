"""A PEP 517 build backend in the standard library only, so that ``pip install ./clients/python``
works offline: setuptools needs ``wheel`` for ``bdist_wheel``, and build isolation would
download both. It builds a pure-Python wheel of the ``viewerd`` package, and an sdist."""
from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import zipfile
from typing import Dict, List, Optional

NAME, VERSION = "viewerd", "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"
DIST_INFO = f"{NAME}-{VERSION}.dist-info"


def _metadata() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            "Summary: Client for viewerd, the thumbnail and rendition cache daemon (blocking and asyncio)\n"
            "Requires-Python: >=3.9\nLicense: MIT\nClassifier: Operating System :: POSIX :: Linux\n"
            "Classifier: Typing :: Typed\nDescription-Content-Type: text/markdown\n\n" + readme)


def _package_files() -> List[str]:
    files = []
    for directory, _dirs, names in os.walk(os.path.join(ROOT, NAME)):
        for name in sorted(names):
            if name.endswith(".py") or name == "py.typed":
                files.append(os.path.relpath(os.path.join(directory, name), ROOT))
    return sorted(files)


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, str]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, str]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[Dict[str, str]] = None) -> str:
    target = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(target, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(target, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return DIST_INFO


def _wheel_file() -> str:
    return f"Wheel-Version: 1.0\nGenerator: viewerd-backend\nRoot-Is-Purelib: true\nTag: {TAG}\n"


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, str]] = None,
                metadata_directory: Optional[str] = None) -> str:
    filename = f"{NAME}-{VERSION}-{TAG}.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as wheel:
        entries = [(path, open(os.path.join(ROOT, path), "rb").read()) for path in _package_files()]
        entries += [(f"{DIST_INFO}/METADATA", _metadata().encode()), (f"{DIST_INFO}/WHEEL", _wheel_file().encode())]
        for path, data in entries:
            wheel.writestr(path, data)
            records.append(_record_line(path, data))
        records.append(f"{DIST_INFO}/RECORD,,")
        wheel.writestr(f"{DIST_INFO}/RECORD", "\n".join(records) + "\n")
    return filename


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, str]] = None) -> str:
    base = f"{NAME}-{VERSION}"
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as sdist:
        for path in _package_files() + ["pyproject.toml", "README.md", "_build/backend.py"]:
            sdist.add(os.path.join(ROOT, path), arcname=f"{base}/{path}")
        info = _metadata().encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(info)
        sdist.addfile(entry, io.BytesIO(info))
    return filename
