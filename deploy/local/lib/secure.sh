# shellcheck shell=bash
# The secured stack's CA, certificates and secrets (deploy/local/stack --secure). Everything is
# generated once into $STATE_DIR (= $STACK_DIR/secure) and reused:
#   tls/ca.crt, tls/ca.key          a private CA (the only file clients need: BACKFLOW_*_TLS_CA_FILE)
#   tls/server.crt, tls/server.key  one server certificate for 127.0.0.1 and localhost, signed by it
#   tls/server.pem                  key + certificate in one PEM file, for Kafka's PEM keystore
#   secrets/*                       random passwords and the token, one per file
# Directories are 0700 and files 0600. No secret is ever passed on a command line: services
# and tools read them from files (Kafka from its properties and a java @argfile, Redis from its
# config, ClickHouse from users.xml as a SHA-256, curl from a -K config file).

TLS_DIR="$STATE_DIR/tls"
SECRETS_DIR="$STATE_DIR/secrets"
SECURE_USER=backflow # the one user every secured service knows

secure_install() { command -v openssl >/dev/null || apt_install openssl; }

# secure_certs makes the CA and the server certificate unless they exist and are valid for
# another day.
secure_certs() {
  secure_install
  mkdir -p "$TLS_DIR" && chmod 755 "$TLS_DIR"
  if [ -f "$TLS_DIR/server.pem" ] && openssl x509 -checkend 86400 -noout -in "$TLS_DIR/server.crt" >/dev/null 2>&1; then
    return 0
  fi
  log "generating a CA and a server certificate for $HOST (openssl, $TLS_DIR)"
  (
    umask 077
    cd "$TLS_DIR" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=backflow local stack CA" \
      -keyout ca.key -out ca.crt -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    # PKCS#8, unencrypted: what Kafka's PEM keystore, Redis, ClickHouse and Go all read.
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out server.key 2>/dev/null
    openssl req -new -key server.key -subj "/CN=localhost" -out server.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
      -extfile server.ext -out server.crt 2>/dev/null
    cat server.key server.crt >server.pem
    rm -f server.csr server.ext ca.srl
  ) || die "generating certificates failed (openssl); see $TLS_DIR"
  chmod 600 "$TLS_DIR"/*
  # The CA certificate is public: clients read it.
  chmod 644 "$TLS_DIR/ca.crt"
}

# secret NAME prints the secret of that name, generating it (32 hex characters) on first use.
secret() {
  local f="$SECRETS_DIR/$1"
  if [ ! -s "$f" ]; then
    mkdir -p "$SECRETS_DIR" && chmod 700 "$SECRETS_DIR"
    secure_install
    (umask 077 && openssl rand -hex 16 >"$f")
  fi
  cat "$f"
}

# secret_file NAME prints the path of that secret's file, generating the secret if needed.
secret_file() { secret "$1" >/dev/null; echo "$SECRETS_DIR/$1"; }

# private_file PATH writes stdin to PATH with mode 0600 (for configs that hold secrets).
private_file() { (umask 077 && cat >"$1.tmp") && chmod 600 "$1.tmp" && mv "$1.tmp" "$1"; }
