"""One module per stage; each registers its checks with :func:`preflight.checks.base.check`."""
