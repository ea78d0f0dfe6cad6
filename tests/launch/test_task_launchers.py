"""srun / mpirun around verl's entry point: each task is one more PPO driver (issue h1, kind 2).

Truth: Slurm's srun runs the command once per task: --ntasks, else one task per node of --nodes
times --ntasks-per-node (srun(1): "-N ... if -n is not specified, one task per node"); mpirun -np N
runs N copies. Each copy of verl 0.9.1's main_ppo calls ray.init() itself when Ray is not
initialised (verl/trainer/main_ppo.py, read here from the installed wheel), so each is a separate driver.
"""

import os
import re
import subprocess

import pytest
from envs import real_env

from preflight.launch.facts import launcher
from preflight.launch.facts.wrapper import unwrap

CASES = [("srun --nodes=2 --ntasks-per-node=1 python3 -m verl.trainer.main_ppo a=1", 2),
         ("srun -N2 python3 -m verl.trainer.main_ppo a=1", 2),
         ("srun -N 2 --ntasks-per-node=4 python3 -m verl.trainer.main_ppo a=1", 8),
         ("srun -N 2 -n 1 python3 -m verl.trainer.main_ppo a=1", 1),
         ("srun --nodes=1 --ntasks=1 python3 -m verl.trainer.main_ppo a=1", 1),
         ("mpirun -np 4 python3 -m verl.trainer.main_ppo a=1", 4)]


@pytest.mark.parametrize("line,copies", CASES)
def test_copies_and_the_launch_inside(line, copies):
    words, w = unwrap(line)
    assert words == ["python3", "-m", "verl.trainer.main_ppo", "a=1"]
    assert w.copies == copies
    rows = [f for f in launcher.check(w, {}) if f.item == "copies"]
    assert [f.status for f in rows] == (["fail"] if copies > 1 else [])


@pytest.mark.realenv
def test_each_copy_of_main_ppo_starts_its_own_ray():
    py = real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])
    root = subprocess.run([py, "-c", "import os, verl; print(os.path.dirname(verl.__file__))"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    with open(os.path.join(root, "trainer", "main_ppo.py")) as fh:
        src = fh.read()
    assert re.search(r"if not ray\.is_initialized\(\):\s*\n(?:.*\n){0,30}?\s*ray\.init\(", src)
