# meshperf's image: the agent and the coordinator, with the measuring tools.
#   make image                 # docker build -t ghcr.io/meshperf/meshperf:dev .
#   docker buildx build --platform linux/amd64,linux/arm64 .   # the release (.github/workflows/release.yml)
# make image-oci builds the same image without docker (deploy/image/build-oci.sh);
# both read the package list from deploy/image/packages.txt.
# deploy/kubernetes runs it: the agent as root (privileged DaemonSet), the
# coordinator as the image's default user.

# The Go stage runs on the build machine and cross-compiles for the target.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
        -ldflags "-s -w -X github.com/meshperf/meshperf/internal/version.Version=${VERSION}" \
        -o /out/ ./cmd/agent ./cmd/coordinator

FROM debian:bookworm-slim
COPY deploy/image/packages.txt /tmp/packages.txt
RUN apt-get update \
    && sed -e 's/#.*//' /tmp/packages.txt | xargs \
        env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    && rm -rf /var/lib/apt/lists/* /tmp/packages.txt \
    && groupadd --gid 65532 meshperf \
    && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin meshperf \
    && install -d -o 65532 -g 65532 /var/lib/meshperf /run/meshperf
COPY --from=build /out/agent /out/coordinator /usr/local/bin/
# Non-root by default; the agent's DaemonSet runs it as root.
USER 65532:65532
EXPOSE 7700 9090 8080
CMD ["coordinator", "serve"]
