"""Outputs of a resolved stack: requirements.lock (lock.py), environment.json (environment.py), the venv install (install.py) and the Dockerfile (dockerfile.py)."""
