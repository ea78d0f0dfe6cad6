"""The rehearsal: the user's own verl launch, run for real for two steps on this node with a
small random-weight model of the same architecture (issue 25).

One concept per module:

* :mod:`.shrink`: the model's ``config.json`` made small, keeping what decides the code path.
* :mod:`.dataslice`: how many rows of the user's data one rehearsal needs, and where they go.
* :mod:`.rewrite`: the launch's overrides rewritten for two steps over the small model and data.
* :mod:`.phases`: the phase table read off verl's own log lines and the GPU memory samples.
* :mod:`.memory`: what the full-size model needs per GPU in each phase.
* :mod:`.supervise`: the run itself, in the target interpreter, with a deadline and nothing left.

Everything that imports torch, transformers, verl or ray runs in the target scripts
``preflight/target/rehearse_*.py``; these modules are the checker's side.
"""
