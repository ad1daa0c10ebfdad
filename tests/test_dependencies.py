"""No PyTorch anywhere: not in the locked dependencies, not imported by the serving path or the agent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lock_file_has_no_torch() -> None:
    names = [
        line.split("==")[0].lower() for line in (ROOT / "requirements.lock").read_text().splitlines() if line
    ]
    assert names and not any(n in ("torch", "torchaudio", "torchvision") for n in names)


def fresh_python(code: str) -> str:
    """Run code in a new interpreter, so modules imported by other tests do not count."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_serving_path_never_imports_torch() -> None:
    code = (
        "import sys, streamvoice.server, streamvoice.engine, streamvoice.agent.app, streamvoice.client;"
        "print('torch' in sys.modules)"
    )
    assert fresh_python(code) == "False"


def test_runtime_never_imports_infra() -> None:
    code = (
        "import sys, streamvoice.server, streamvoice.agent.app, streamvoice.cli;"
        "print(any(m.startswith('streamvoice.infra') or m.startswith('aws_cdk') for m in sys.modules))"
    )
    assert fresh_python(code) == "False"
