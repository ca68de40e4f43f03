# What is not the product, for the compose demo: the stand-in sensitive-word service (a peer
# for ingest to call; in production sensitive_words.url points at your own service) with its
# sample dictionary, and the load generator. backflow itself is deploy/Dockerfile.
#   docker build -f deploy/tools.Dockerfile -t backflow-tools:latest .
#   docker run --entrypoint /usr/local/bin/sensitive-words backflow-tools:latest --addr 0.0.0.0:8090 --dictionary /usr/share/backflow/sample.tsv
#   docker run --entrypoint /usr/local/bin/loadgen backflow-tools:latest --help

# --- build: the Go version of go.mod, no cgo ---
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0 GOOS=linux
RUN go build -trimpath -ldflags "-s -w" -o /out/sensitive-words ./tools/sensitive-words/cmd/sensitive-words \
 && go build -trimpath -ldflags "-s -w" -o /out/loadgen ./tools/loadgen/cmd/loadgen

# --- run: no shell, no package manager, a non-root user ---
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sensitive-words /usr/local/bin/sensitive-words
COPY --from=build /out/loadgen /usr/local/bin/loadgen
COPY --from=build /src/deploy/sensitive-words/sample.tsv /usr/share/backflow/sample.tsv
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/sensitive-words"]
CMD ["--addr", "0.0.0.0:8090", "--dictionary", "/usr/share/backflow/sample.tsv"]
