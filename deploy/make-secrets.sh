#!/usr/bin/env bash
# Makes the secrets deploy/compose.yaml needs, in deploy/secrets/ (mode 0700, every file 0600):
#   control.env  the copies' settings that are secret: AGENTS_CONTROL_KEY (32 random bytes,
#                base64url), AGENTS_CONTROL_PIN, and the bucket keys
#   minio.env    MinIO's root user and password (random)
#   store.env    the bucket keys alone, for `agents-control store check` (docker run --env-file)
#   proxy.crt, proxy.key   a self-signed certificate for Caddy (127.0.0.1 and localhost)
# and prints the pin, the base64url SHA-256 of the certificate's SubjectPublicKeyInfo, which every
# code then carries (`agents-control pin --cert deploy/secrets/proxy.crt` prints the same).
# It never overwrites: if any of these files exists it changes nothing and says so.
# These secrets are for trying the control plane on one machine; see docs/control-plane/deploy.md.
set -euo pipefail

usage() {
  echo "usage: deploy/make-secrets.sh [--dir DIR]   (default DIR: deploy/secrets)" >&2
}

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/secrets"
while [ $# -gt 0 ]; do
  case "$1" in
    --dir)
      [ $# -ge 2 ] || { usage; exit 2; }
      dir="$2"
      shift 2
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "make-secrets: unknown argument '$1'" >&2
      usage
      exit 2
      ;;
  esac
done

command -v openssl >/dev/null || {
  echo "make-secrets: openssl is not installed (Debian/Ubuntu: apt-get install openssl)" >&2
  exit 1
}

files=(control.env minio.env store.env proxy.crt proxy.key)
existing=()
for f in "${files[@]}"; do
  [ -e "$dir/$f" ] && existing+=("$dir/$f")
done
if [ ${#existing[@]} -gt 0 ]; then
  echo "make-secrets: refusing to overwrite existing secrets: ${existing[*]}" >&2
  echo "make-secrets: they are in use by a running or earlier deploy; remove them yourself to start afresh" >&2
  exit 1
fi

# Every file written from here on is readable by its owner only.
umask 077
mkdir -p "$dir"
chmod 700 "$dir"

# base64url without padding: the form AGENTS_CONTROL_KEY and pins use.
base64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
# Random text safe in an env file (no quotes or spaces): hex.
random_hex() { openssl rand -hex "$1"; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
  -subj "/CN=hyperhive control plane (self-signed)" \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$dir/proxy.key" -out "$dir/proxy.crt" 2>/dev/null
pin=$(openssl x509 -in "$dir/proxy.crt" -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64url)

minio_user="hyperhive-$(random_hex 4)"
minio_password=$(random_hex 24)
cat >"$dir/minio.env" <<ENV
MINIO_ROOT_USER=$minio_user
MINIO_ROOT_PASSWORD=$minio_password
ENV

# The same 32 bytes must reach every copy; as base64url text so no file has to be mounted into
# the containers' non-root user.
control_key=$(head -c 32 /dev/urandom | base64url)
cat >"$dir/control.env" <<ENV
AGENTS_CONTROL_KEY=$control_key
AGENTS_CONTROL_PIN=$pin
AWS_ACCESS_KEY_ID=$minio_user
AWS_SECRET_ACCESS_KEY=$minio_password
ENV

# The bucket keys without the control key: checking a bucket needs no more.
cat >"$dir/store.env" <<ENV
AWS_ACCESS_KEY_ID=$minio_user
AWS_SECRET_ACCESS_KEY=$minio_password
ENV

echo "make-secrets: wrote control.env, minio.env, store.env, proxy.crt and proxy.key to $dir (0600)"
echo "pin: $pin"
