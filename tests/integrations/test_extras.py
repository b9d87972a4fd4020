"""Each framework integration installs with an extra of its name (`pip install 'corral[huggingface]'`)."""

from __future__ import annotations

import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _extras() -> dict[str, list[str]]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def test_every_integration_has_an_extra_that_installs_its_framework():
    extras = _extras()
    integrations = sorted(name[:-3] for name in os.listdir(os.path.join(ROOT, "src", "corral", "integrations"))
                          if name.endswith(".py") and not name.startswith("_"))
    assert integrations == ["huggingface", "lightning"]
    for name in integrations:
        assert name in extras, f"no [{name}] extra"
    packages = {requirement.split(">")[0].split("<")[0].split("=")[0].strip() for requirement in extras["huggingface"]}
    assert packages == {"transformers", "accelerate"}  # Trainer will not even build its arguments without accelerate


def test_import_wandb_has_its_extra():
    assert any(requirement.startswith("wandb") for requirement in _extras()["wandb"])
