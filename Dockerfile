# Minimal: an image that carries the checker and runs its CPU-side stages at build time.
# (The verl base-image build through bootstrap.sh comes with the outputs issue.)
FROM python:3.12-slim
COPY dist/preflight.pyz /opt/verl-preflight/preflight.pyz
COPY bootstrap.sh /opt/verl-preflight/bootstrap.sh
RUN python3 -I -S /opt/verl-preflight/preflight.pyz --version
ENTRYPOINT ["/opt/verl-preflight/bootstrap.sh", "--pyz", "/opt/verl-preflight/preflight.pyz"]
