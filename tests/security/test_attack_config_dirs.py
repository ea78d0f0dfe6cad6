"""Config directories Hydra reads for a launch (rev-attack F8, new kind, LEAK): root ran
``config -- 'hydra.searchpath=[file:///tmp/sh/hs2]' +grp=s`` where uid 65534 had made
``/tmp/sh/hs2/grp/s.yaml -> /root/secret_cfg.yaml`` and the root-only file's values reached the
report; ``config --file`` through the same link was refused. Mechanism
(``launch/compose/gate.py``): every tree Hydra will read (the launch's --config-path, and each
``hydra.searchpath`` directory named by an override, by the user's --file or by the primary config
itself) is walked before the composing child starts, and each file goes through the same gate as
one input file (``paths.file_problem``: another user's link to what they cannot read, a FIFO)."""

import os

import pytest

import seckit
from seckit import as_nobody, need_root, one_line_error, pf, shared_dir

LEAK = pytest.mark.fault("LEAK")
HANG = pytest.mark.fault("HANG")
WRONG = pytest.mark.fault("WRONG")
SECRET = "RootOnlyCfg_93kq"


@pytest.fixture
def tree(tmp_path):
    """(a root-only YAML, a shared directory holding uid 65534's tree ``hs/grp`` with their link
    ``s.yaml`` to it)."""
    need_root()
    seckit.reachable(str(tmp_path))
    private = tmp_path / "rootonly"
    private.mkdir(mode=0o700)
    os.chmod(str(private), 0o700)
    secret = private / "secret_cfg.yaml"
    secret.write_text("note: %s\n" % SECRET)
    os.chmod(str(secret), 0o644)
    shared = shared_dir(str(tmp_path / "shared"))
    as_nobody("mkdir", "-p", os.path.join(shared, "hs", "grp"))
    as_nobody("ln", "-s", str(secret), os.path.join(shared, "hs", "grp", "s.yaml"))
    return str(secret), shared


def _refused(p, what):
    out = p.stdout + p.stderr
    assert SECRET not in out, out[-1500:]
    assert "link of another user" in p.stderr and what in p.stderr and one_line_error(p), out[-1500:]


@LEAK
@pytest.mark.parametrize("form", ["hydra.searchpath=[file://{d}]", "+hydra.searchpath=['file://{d}']",
                                  "hydra.searchpath=[pkg://verl.trainer.config,{d}]"])
def test_searchpath_override_through_another_users_link(pyz, tree, form):
    _, shared = tree
    p = pf(pyz, "config", "--verl", "0.9.1", "--", form.format(d=os.path.join(shared, "hs")), "+grp=s")
    _refused(p, "hydra.searchpath entry")


@LEAK
def test_searchpath_declared_in_the_users_file(pyz, tree, tmp_path):
    _, shared = tree
    f = tmp_path / "mine.yaml"
    f.write_text("hydra:\n  searchpath:\n    - file://%s\ndata:\n  train_batch_size: 8\n" % os.path.join(shared, "hs"))
    p = pf(pyz, "config", "--verl", "0.9.1", "--file", str(f), "--", "+grp=s")
    _refused(p, "hydra.searchpath entry")


@LEAK
def test_config_path_holding_another_users_link(pyz, tree):
    _, shared = tree
    p = pf(pyz, "config", "--verl", "0.9.1", "--", "python3", "-m", "verl.trainer.main_ppo",
           "--config-path=%s" % os.path.join(shared, "hs"), "--config-name=ppo_trainer")
    _refused(p, "--config-path")


@HANG
def test_fifo_with_a_configs_name_in_a_searchpath_dir(pyz, tmp_path):
    d = tmp_path / "sp" / "grp"
    d.mkdir(parents=True)
    os.mkfifo(str(d / "s.yaml"))
    p = pf(pyz, "config", "--verl", "0.9.1", "--timeout", "20", "--", "hydra.searchpath=[file://%s]" % (tmp_path / "sp"),
           "+grp=s", timeout=60)
    assert p.returncode == 2 and "a FIFO" in p.stderr and one_line_error(p), p.stderr[-1500:]


@WRONG
def test_own_searchpath_still_composes(pyz, tmp_path):
    """A searchpath of the user's own (with their own link inside) is read as before."""
    d = tmp_path / "sp" / "grp"
    d.mkdir(parents=True)
    (tmp_path / "real.yaml").write_text("note: mine\n")
    os.symlink(str(tmp_path / "real.yaml"), str(d / "s.yaml"))
    p = pf(pyz, "config", "--verl", "0.9.1", "--format", "json", "--", "hydra.searchpath=[file://%s]" % (tmp_path / "sp"),
           "+grp=s")
    assert "link of another user" not in p.stderr and "grp" in p.stdout, (p.stdout + p.stderr)[-1500:]
