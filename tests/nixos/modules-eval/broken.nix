# Configurations nixpkgs' module system must refuse, each with the start of the message it refuses
# them with (nixpkgs' own wording, or the hyperhive assertion's under nixpkgs' "Failed
# assertions:"). broken.py evaluates each and matches the error; a configuration that evaluates
# fails the test.
let
  copy = {
    enable = true;
    store.url = "s3://hyperhive/control";
    keyFile = "/run/secrets/control-key";
    url = "https://agents.example.com";
  };
  natsNode = pkgs: {
    enable = true;
    fragment = pkgs.writeText "nats-server.conf" "";
  };
in
{
  "a definition of the wrong type" = {
    module.services.hyperhive.deploy.agents-control = copy // { port = "8791"; };
    expect = "A definition for option `services.hyperhive.deploy.agents-control.port' is not of type `16 bit unsigned integer;";
  };
  "a value its pattern refuses" = {
    module.services.hyperhive.deploy.agents-control = copy // { url = "http://agents.example.com"; };
    expect = "A definition for option `services.hyperhive.deploy.agents-control.url' is not of type `string matching the pattern https://";
  };
  "two definitions of one unit setting that conflict" = {
    module = {
      services.hyperhive.deploy.swarm-controller.enable = true;
      systemd.services.swarm-controller.serviceConfig.User = "ops";
    };
    expect = "The option `systemd.services.swarm-controller.serviceConfig.User' has conflicting definition values:";
  };
  "a hive pinning a curve key where the controller's deploy key belongs" = {
    module.services.hyperhive.deploy.hive-controller = {
      enable = true;
      hive = "hive1";
      nats.url = "nats://nats:4222";
      nats.credentialsFile = "/run/secrets/hive1.creds";
      xkeyFile = "/run/secrets/hive1.xk";
      controllerKeys = [ "XAZTNPWSYEYWH5ICW2HR5U4M26LI66W4XXNXELQPKMNGXMFZ5LJAOWXO" ];
    };
    expect = "A definition for option `services.hyperhive.deploy.hive-controller.controllerKeys.\"[definition 1-entry 1]\"' is not of type `string matching the pattern V[A-Z2-7]{55}'";
  };
  "an option that does not exist" = {
    module.services.hyperhive.deploy.agents-control = copy // { listen = "0.0.0.0:8791"; };
    expect = "The option `services.hyperhive.deploy.agents-control.listen' does not exist.";
  };
  "a NixOS option that does not exist" = {
    module.systemd.services.agents-control.serviceConfg.User = "ops";
    expect = "The option `systemd.services.agents-control.serviceConfg' does not exist.";
  };
  "a failed assertion" = {
    module.services.hyperhive.deploy.agents-control = copy // { keyFile = "${builtins.storeDir}/00000000000000000000000000000000-key"; };
    expect = "Failed assertions:\n- services.hyperhive.deploy.agents-control.keyFile is in the Nix store";
  };
  "nixpkgs' services.nats beside the swarm's NATS on the same state directory" = {
    module =
      { pkgs, ... }:
      {
        services.hyperhive.deploy.nats = natsNode pkgs;
        services.nats.enable = true;
      };
    expect = "Failed assertions:\n- services.hyperhive.deploy.nats.enable and services.nats.enable are both set, and services.nats uses\nthe same state directory, /var/lib/nats";
  };
  "nixpkgs' services.nats beside the swarm's NATS on the same port" = {
    module =
      { pkgs, ... }:
      {
        services.hyperhive.deploy.nats = natsNode pkgs;
        services.nats = {
          enable = true;
          dataDir = "/var/lib/other-nats";
        };
      };
    expect = "the same port, 4222";
  };
}
