#!/bin/sh
# Starts SeaweedFS as the tryout's bucket service: MinIO's root user and password (from
# deploy/secrets/minio.env, the compose file's env_file) are its only S3 identity, so a request
# signed with any other key is refused, as MinIO refuses it.
set -eu
: "${MINIO_ROOT_USER:?MINIO_ROOT_USER is not set}" "${MINIO_ROOT_PASSWORD:?MINIO_ROOT_PASSWORD is not set}"
umask 077
mkdir -p /run/seaweedfs
printf '{"identities":[{"name":"root","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List","Tagging"]}]}\n' \
  "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/run/seaweedfs/s3.json
# -ip: the name the other containers reach this one by (bucket-init's `weed shell` is sent to
# the filer at the address the master gives). Telemetry off; the Iceberg and Lance catalogs off.
exec weed server -dir=/data -ip="${SEAWEEDFS_IP:-minio}" -ip.bind=0.0.0.0 -master.telemetry=false \
  -s3 -s3.port=9000 -s3.config=/run/seaweedfs/s3.json -s3.port.iceberg=0 -s3.port.lance=0
