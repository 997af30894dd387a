# meshperf's image: the agent and the coordinator, with the measuring tools.
#   make image                 # docker build -t ghcr.io/meshperf/meshperf:dev .
# deploy/kubernetes runs it: the agent as root (privileged DaemonSet), the
# coordinator as the image's default user.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
        -ldflags "-s -w -X github.com/meshperf/meshperf/internal/version.Version=${VERSION}" \
        -o /out/ ./cmd/agent ./cmd/coordinator

FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        iperf3 qperf iputils-ping curl iproute2 iptables apache2-utils ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 meshperf \
    && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin meshperf \
    && install -d -o 65532 -g 65532 /var/lib/meshperf /run/meshperf
COPY --from=build /out/agent /out/coordinator /usr/local/bin/
# Non-root by default; the agent's DaemonSet runs it as root.
USER 65532:65532
EXPOSE 7700 9090
CMD ["coordinator", "serve"]
