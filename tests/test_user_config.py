"""A user's defaults from config files (~/.config/kernelcraft/config.toml, then ./kernelcraft.toml): `config show`
says where each came from, a new optimize run takes the model, endpoint and device from them, a flag wins over them,
and a bad file is one line."""

from __future__ import annotations

import json
from pathlib import Path

from .fake_openai import FakeOpenAI
from .test_cli import kc, one_line_error


def test_defaults_come_from_the_nearer_file_and_a_new_run_takes_them(tmp_path: Path) -> None:
    home = tmp_path / "xdg"
    (home / "kernelcraft").mkdir(parents=True)
    (home / "kernelcraft" / "config.toml").write_text('device = "cuda"\nmodel = "some-other-model"\napi_key_env = "MY_KEY"\n')
    env = {"XDG_CONFIG_HOME": str(home), "MY_KEY": "secret"}
    with FakeOpenAI(models=["fake-coder"], responder=lambda m: "no code today") as srv:
        (tmp_path / "kernelcraft.toml").write_text(f'device = "cpu"\nmodel = "fake-coder"\nbase_url = "{srv.url}"\n')
        p = kc("config", "show", "--json", cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr
        shown = json.loads(p.stdout)["settings"]
        assert shown["device"] == {"value": "cpu", "source": str(tmp_path / "kernelcraft.toml")}
        assert shown["api_key_env"] == {"value": "MY_KEY", "source": str(home / "kernelcraft" / "config.toml")}
        assert shown["workspace"]["source"] == "$KERNELCRAFT_WORKSPACE"  # the environment over the files

        p = kc("optimize", "row_mean_square", "--samples", "1", "--turns", "1", "--json", cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        assert len(srv.requests) == 1 and srv.requests[0]["model"] == "fake-coder"
        p = kc("optimize", "row_mean_square", "--model", "missing-model", cwd=tmp_path, env=env)  # a flag wins
        assert "does not serve model 'missing-model'" in one_line_error(p)


def test_a_config_file_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "kernelcraft.toml").write_text('devise = "cpu"\n')
    assert "kernelcraft.toml: unknown setting devise" in one_line_error(kc("tasks", "list", "examples", cwd=tmp_path))
    (tmp_path / "kernelcraft.toml").write_text('device = "gpu"\n')
    assert "kernelcraft.toml: device: Input should be 'cuda' or 'cpu'" in one_line_error(kc("config", "show", cwd=tmp_path))
