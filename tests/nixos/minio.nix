# MinIO for the VM tests: a node serving the S3 API on port 9000, its bucket `hyperhive` made once
# MinIO answers, and the bucket's keys as the agents-control module takes them (an AWS shared
# credentials file, `store.credentialsFile`). Test-only secrets, deliberately in the Nix store;
# nodes copy the credentials file to /etc first, as a secret manager would deliver real ones.
{ pkgs }:
let
  user = "hyperhive-test";
  password = "hyperhive-test-secret";
  env = pkgs.writeText "minio.env" ''
    MINIO_ROOT_USER=${user}
    MINIO_ROOT_PASSWORD=${password}
  '';
in
{
  credentials = pkgs.writeText "bucket-credentials" ''
    [default]
    aws_access_key_id = ${user}
    aws_secret_access_key = ${password}
  '';

  node =
    { ... }:
    {
      environment.etc."minio.env".source = env;
      services.minio = {
        enable = true;
        rootCredentialsFile = "/etc/minio.env";
      };
      networking.firewall.allowedTCPPorts = [ 9000 ];
      virtualisation.diskSize = 2048;
      virtualisation.memorySize = 2048;
      # The bucket, made once MinIO answers.
      systemd.services.minio-bucket = {
        wantedBy = [ "multi-user.target" ];
        requires = [ "minio.service" ];
        after = [ "minio.service" ];
        path = [ pkgs.minio-client ];
        environment.HOME = "/run/minio-bucket";
        serviceConfig = {
          Type = "oneshot";
          RemainAfterExit = true;
          RuntimeDirectory = "minio-bucket";
          EnvironmentFile = "/etc/minio.env";
        };
        script = ''
          until mc alias set local http://127.0.0.1:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD"; do
            sleep 1
          done
          mc mb --ignore-existing local/hyperhive
        '';
      };
    };
}
