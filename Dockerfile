# verl base image, built the way clusters are provisioned: through bootstrap.sh, which resolves
# the stack for VERL_VERSION and BACKEND, locks it with hashes, installs it into /opt/verl and
# runs the checks that need no GPU (a failure stops the build). The GPU stages run once at start (the
# default command); there is no HEALTHCHECK, which would open CUDA contexts and run NCCL collectives
# every few minutes on GPUs that are busy training (GPU health during a job is DCGM's work).
#
#   python3 tools/build_pyz.py
#   docker build --build-arg VERL_VERSION=0.9.1 --build-arg BACKEND=vllm -t verl:0.9.1 .
#
# CUDA_IMAGE must carry a CUDA the hosts' driver runs: 13.0 (driver >= 580) for verl 0.9.1's torch
# 2.11 cu130 stack; 'preflight resolve --verl X' names the CUDA a release needs, and
# matrices/base_images.toml the image (and its digest, with how far it is verified) for each torch
# CUDA variant. It is pinned by digest; Ubuntu 24.04's own Python 3.12 is the environment's Python.
ARG CUDA_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04@sha256:1e8ac7a54c184a1af8ef2167f28fa98281892a835c981ebcddb1fad04bdd452d
FROM ${CUDA_IMAGE}

ARG VERL_VERSION=0.9.1
ARG BACKEND=vllm
ARG PYTHON_VERSION=3.12
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends "python${PYTHON_VERSION}" "python${PYTHON_VERSION}-venv" \
       ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --no-log-init --create-home --uid 10001 --user-group verl

COPY dist/preflight.pyz bootstrap.sh /opt/verl-preflight/
RUN /opt/verl-preflight/bootstrap.sh --pyz /opt/verl-preflight/preflight.pyz \
        --verl "${VERL_VERSION}" --backend "${BACKEND}" --prefix /opt/verl \
        --install-args "--python ${PYTHON_VERSION} --no-probe" \
        --json /opt/verl-preflight/build-report.json \
        -- --stage python,packages,imports

ENV PATH=/opt/verl/bin:$PATH VIRTUAL_ENV=/opt/verl
# run as the non-root user verl (uid 10001, above Ubuntu 24.04's own 'ubuntu'); /opt/verl stays root-owned
USER 10001:10001
WORKDIR /home/verl
CMD ["/opt/verl-preflight/bootstrap.sh", "--check-only", "--prefix", "/opt/verl"]
