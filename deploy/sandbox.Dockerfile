# The image of every program's sandbox pod (run config `sandbox.k8s.image`): what the environments'
# tools run inside the sandbox, at the paths they use: /usr/bin/bc (calc), /usr/bin/patch and
# /usr/bin/node with `node --test` (swe-mini's planting and hidden tests); /bin/sh, env, cat, sleep for
# the k8s provider itself.
#   docker build -f deploy/sandbox.Dockerfile -t arbor-sandbox:latest deploy
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bc patch nodejs \
 && rm -rf /var/lib/apt/lists/*
# The k8s provider runs every sandbox as uid 65534 (nobody) with a read-only root filesystem; /workspace
# and /tmp are emptyDir volumes of the pod.
USER 65534:65534
WORKDIR /workspace
