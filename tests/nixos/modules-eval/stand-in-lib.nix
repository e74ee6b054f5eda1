# A stand-in for the part of nixpkgs' `lib` the hyperhive modules use, so they can be evaluated
# where nixpkgs is not available (this project's build machines; see ../README.md). Each function
# here behaves as its nixpkgs namesake for the arguments the modules pass; the module system itself
# (types, merging, priorities) is not modelled: options are read back as their declarations, and
# the evaluation in default.nix supplies defaults and values itself.
let
  b = builtins;
in
rec {
  mkOption = declaration: declaration // { _isOption = true; };
  mkEnableOption =
    name:
    mkOption {
      type = types.bool;
      default = false;
      example = true;
      description = "Whether to enable ${name}.";
    };
  # As nixpkgs': a description from the name and `extraDescription`, and an example only when given.
  mkPackageOption =
    set: name:
    {
      example ? null,
      extraDescription ? "",
      pkgsText ? "pkgs",
      ...
    }:
    mkOption (
      {
        type = types.package;
        default = set.${name};
        defaultText = literalExpression "${pkgsText}.${name}";
        description = "The ${name} package to use." + (if extraDescription == "" then "" else " ${extraDescription}");
      }
      // (if example == null then { } else { example = literalExpression example; })
    );
  literalExpression = text: {
    _type = "literalExpression";
    inherit text;
  };
  mkIf = condition: content: if condition then content else { };

  # Types are only named: the evaluation checks values itself where it matters.
  types =
    let
      type = name: { inherit name; };
      wrap = name: inner: type name // { inherit inner; };
    in
    {
      str = type "str";
      attrs = type "attrs";
      bool = type "bool";
      path = type "path";
      port = type "port";
      package = type "package";
      ints.positive = type "positiveInt";
      ints.between = lowest: highest: type "intBetween" // { inherit lowest highest; };
      strMatching = pattern: type "strMatching ${pattern}";
      enum = values: type "enum" // { inherit values; };
      nullOr = wrap "nullOr";
      listOf = wrap "listOf";
      attrsOf = wrap "attrsOf";
      submodule = module: type "submodule" // { inherit module; };
    };

  hasPrefix = prefix: text: b.substring 0 (b.stringLength prefix) text == prefix;
  removePrefix =
    prefix: text:
    if hasPrefix prefix text then b.substring (b.stringLength prefix) (-1) text else text;
  hasInfix =
    infix: text:
    let
      width = b.stringLength infix;
    in
    width <= b.stringLength text
    && b.any (at: b.substring at width text == infix) (b.genList (at: at) (b.stringLength text - width + 1));
  filterAttrs =
    keep: set: b.listToAttrs (b.filter (e: keep e.name e.value) (mapAttrsToList nameValuePair set));
  inherit (b)
    mapAttrs
    concatLists
    concatMap
    elem
    attrNames
    concatStringsSep
    replaceStrings
    ;
  mapAttrs' = f: set: b.listToAttrs (mapAttrsToList f set);
  nameValuePair = name: value: { inherit name value; };
  mapAttrsToList = f: set: map (name: f name set.${name}) (b.attrNames set);
  splitString = separator: text: b.filter b.isString (b.split separator text);
  toList = x: if b.isList x then x else [ x ];
  optional = condition: x: if condition then [ x ] else [ ];
  optionalAttrs = condition: set: if condition then set else { };
  optionalString = condition: text: if condition then text else "";
  makeBinPath = packages: concatStringsSep ":" (map (package: "${package}/bin") packages);
  getExe = package: "${package}/bin/${package.meta.mainProgram}";
  getExe' = package: name: "${package}/bin/${name}";
  escapeShellArg = text: "'${b.replaceStrings [ "'" ] [ "'\\''" ] (toString text)}'";
  toShellVars =
    vars: concatStringsSep "\n" (mapAttrsToList (name: value: "${name}=${escapeShellArg value}") vars);
}
