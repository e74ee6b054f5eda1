//! Authelia's file user database (`users_database.yml`), as Authelia's file authentication
//! backend reads it:
//!
//! ```yaml
//! users:
//!   <name>:
//!     disabled: false
//!     displayname: "..."
//!     password: "$argon2id$v=19$m=65536,t=3,p=4$..."
//!     email: ...
//!     groups: [...]
//! ```
//!
//! The whole document is kept as a YAML value, so every other user, every field this service
//! does not know (Authelia's optional attributes such as `given_name` or `extra`) and every other
//! top-level key comes back out with the same meaning. Comments and the original quoting and
//! layout are not kept: the file is written anew. A user is *managed* when its `groups` hold the
//! managed group; only managed users are ever changed or deleted.

use yaml_serde::{Mapping, Value};

use crate::input::UserName;

/// Why the file cannot be used. Messages name the place in the file, never a value from it (a
/// value could be a password hash).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

/// The parsed file.
#[derive(Debug, Clone, PartialEq)]
pub struct Database {
    root: Mapping,
}

/// One user, as the API shows it (never the hash).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UserView {
    /// The user name.
    pub name: String,
    /// `displayname`.
    pub displayname: String,
    /// `email`.
    pub email: String,
    /// `groups`.
    pub groups: Vec<String>,
    /// `disabled`.
    pub disabled: bool,
    /// Whether the user carries the managed group.
    pub managed: bool,
}

/// What [`Database::upsert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// The user is new.
    Created,
    /// A managed user was changed.
    Updated,
    /// A managed user already was exactly so: nothing to write.
    Unchanged,
}

/// What refused a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No such user.
    Unknown,
    /// The user exists without the managed group.
    Unmanaged,
}

/// The fields a write sets.
#[derive(Debug, Clone)]
pub struct NewFields {
    /// `displayname`.
    pub displayname: String,
    /// `email`.
    pub email: String,
    /// `groups`, the managed group already among them.
    pub groups: Vec<String>,
    /// `password`, the PHC string.
    pub password_hash: String,
}

fn key(s: &str) -> Value {
    Value::String(s.to_owned())
}

impl Database {
    /// An empty database (no file yet).
    pub fn empty() -> Self {
        Self { root: Mapping::new() }
    }

    /// Parses the file's text. An empty document is an empty database.
    ///
    /// # Errors
    /// When it is not YAML, or not shaped as Authelia's users file: the top level, `users` and
    /// each user must be mappings, each user name a string.
    pub fn parse(text: &str) -> Result<Self, Malformed> {
        let value: Value = yaml_serde::from_str(text).map_err(|e| Malformed(format!("it is not valid YAML: {e}")))?;
        let root = match value {
            Value::Null => Mapping::new(),
            Value::Mapping(root) => root,
            _ => return Err(Malformed("its top level is not a mapping (Authelia expects `users:` at the top)".into())),
        };
        match root.get("users") {
            None | Some(Value::Null) => {}
            Some(Value::Mapping(users)) => {
                for (name, user) in users {
                    let Value::String(name) = name else {
                        return Err(Malformed("a key under `users` is not a string".into()));
                    };
                    if !matches!(user, Value::Mapping(_)) {
                        return Err(Malformed(format!("users.{name} is not a mapping")));
                    }
                }
            }
            Some(_) => return Err(Malformed("`users` is not a mapping".into())),
        }
        Ok(Self { root })
    }

    /// The YAML text to write.
    ///
    /// # Errors
    /// When the value cannot be written as YAML (only a parsed file's values are held, so never).
    pub fn to_yaml(&self) -> Result<String, Malformed> {
        yaml_serde::to_string(&self.root).map_err(|e| Malformed(format!("cannot write it as YAML: {e}")))
    }

    fn users(&self) -> Option<&Mapping> {
        self.root.get("users").and_then(Value::as_mapping)
    }

    fn user_mapping(&self, name: &UserName) -> Option<&Mapping> {
        self.users().and_then(|users| users.get(name.as_str())).and_then(Value::as_mapping)
    }

    /// Whether `name` exists and carries `managed_group`.
    pub fn is_managed(&self, name: &UserName, managed_group: &str) -> Option<bool> {
        self.user_mapping(name).map(|user| has_group(user, managed_group))
    }

    /// One user, or `None`.
    ///
    /// # Errors
    /// When one of the user's known fields has the wrong type (named, never its value).
    pub fn user(&self, name: &UserName, managed_group: &str) -> Result<Option<UserView>, Malformed> {
        let Some(user) = self.user_mapping(name) else {
            return Ok(None);
        };
        let text = |field: &str| match user.get(field) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(Malformed(format!("users.{name}.{field} is not a string"))),
        };
        let groups = match user.get("groups") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Sequence(items)) => items
                .iter()
                .map(|g| g.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Malformed(format!("users.{name}.groups holds something other than strings")))?,
            Some(_) => return Err(Malformed(format!("users.{name}.groups is not a list"))),
        };
        let disabled = match user.get("disabled") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(Malformed(format!("users.{name}.disabled is not true or false"))),
        };
        Ok(Some(UserView {
            name: name.to_string(),
            displayname: text("displayname")?,
            email: text("email")?,
            managed: groups.iter().any(|g| g == managed_group),
            groups,
            disabled,
        }))
    }

    /// The stored password hash of a managed user.
    ///
    /// # Errors
    /// [`Refused::Unknown`] or [`Refused::Unmanaged`].
    pub fn managed_hash(&self, name: &UserName, managed_group: &str) -> Result<Option<String>, Refused> {
        let user = self.user_mapping(name).ok_or(Refused::Unknown)?;
        if !has_group(user, managed_group) {
            return Err(Refused::Unmanaged);
        }
        Ok(user.get("password").and_then(Value::as_str).map(str::to_owned))
    }

    /// Creates `name`, or changes it when it is managed. A new user gets Authelia's documented
    /// fields in its documented order and `disabled: false`; a changed one keeps its place, its
    /// `disabled` and every field not set here.
    ///
    /// # Errors
    /// [`Refused::Unmanaged`] when the user exists without `managed_group`.
    pub fn upsert(&mut self, name: &UserName, managed_group: &str, fields: NewFields) -> Result<Upserted, Refused> {
        if !matches!(self.root.get("users"), Some(Value::Mapping(_))) {
            self.root.insert(key("users"), Value::Mapping(Mapping::new()));
        }
        let Some(Value::Mapping(users)) = self.root.get_mut("users") else {
            unreachable!("`users` was just made a mapping");
        };
        let groups = Value::Sequence(fields.groups.into_iter().map(Value::String).collect());
        match users.get_mut(name.as_str()) {
            Some(Value::Mapping(user)) => {
                if !has_group(user, managed_group) {
                    return Err(Refused::Unmanaged);
                }
                // `insert` on an existing key keeps its position, so the entry reads as before.
                let mut changed = user.clone();
                changed.insert(key("displayname"), Value::String(fields.displayname));
                changed.insert(key("password"), Value::String(fields.password_hash));
                changed.insert(key("email"), Value::String(fields.email));
                changed.insert(key("groups"), groups);
                if changed == *user {
                    return Ok(Upserted::Unchanged);
                }
                *user = changed;
                Ok(Upserted::Updated)
            }
            Some(_) => Err(Refused::Unmanaged),
            None => {
                let mut user = Mapping::new();
                user.insert(key("disabled"), Value::Bool(false));
                user.insert(key("displayname"), Value::String(fields.displayname));
                user.insert(key("password"), Value::String(fields.password_hash));
                user.insert(key("email"), Value::String(fields.email));
                user.insert(key("groups"), groups);
                users.insert(key(name.as_str()), Value::Mapping(user));
                Ok(Upserted::Created)
            }
        }
    }

    /// Removes a managed user.
    ///
    /// # Errors
    /// [`Refused::Unknown`] or [`Refused::Unmanaged`].
    pub fn remove(&mut self, name: &UserName, managed_group: &str) -> Result<(), Refused> {
        let Some(Value::Mapping(users)) = self.root.get_mut("users") else {
            return Err(Refused::Unknown);
        };
        match users.get(name.as_str()) {
            None => Err(Refused::Unknown),
            Some(Value::Mapping(user)) if has_group(user, managed_group) => {
                // `shift_remove` keeps the other users in their order.
                users.shift_remove(name.as_str());
                Ok(())
            }
            Some(_) => Err(Refused::Unmanaged),
        }
    }
}

fn has_group(user: &Mapping, group: &str) -> bool {
    user.get("groups")
        .and_then(Value::as_sequence)
        .is_some_and(|groups| groups.iter().any(|g| g.as_str() == Some(group)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const MANAGED: &str = "hyperhive-agents";

    fn name(s: &str) -> UserName {
        UserName::parse(s).unwrap()
    }

    fn fields(hash: &str) -> NewFields {
        NewFields {
            displayname: "Agent".into(),
            email: "agent@example.com".into(),
            groups: vec!["dev".into(), MANAGED.into()],
            password_hash: hash.into(),
        }
    }

    const HUMANS: &str = r#"
users:
  alice:
    disabled: false
    displayname: "Alice 'yes'"
    password: "$6$rounds=50000$salt$hash"
    email: alice@example.com
    groups: [admins, "yes", "012"]
    given_name: Alice
    extra:
      badge: 7
  bob:
    displayname: Bob
    password: "$2b$12$x"
    email: bob@example.com
other_top_level: kept
"#;

    #[test]
    fn empty_and_missing_documents_are_empty_databases() {
        for text in ["", "# only a comment\n", "users:\n", "users: {}\n"] {
            let db = Database::parse(text).unwrap();
            assert_eq!(db.user(&name("a"), MANAGED).unwrap(), None, "{text:?}");
        }
    }

    #[test]
    fn malformed_files_are_named_without_their_values() {
        let cases = [
            ("users: [\n", "not valid YAML"),
            ("- a\n", "top level is not a mapping"),
            ("users: 3\n", "`users` is not a mapping"),
            ("users:\n  alice: \"$argon2id$secret\"\n", "users.alice is not a mapping"),
            ("users:\n  1: {}\n", "not a string"),
        ];
        for (text, expected) in cases {
            let err = Database::parse(text).unwrap_err().0;
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn writes_touch_only_the_managed_user_and_keep_everything_else() {
        let mut db = Database::parse(HUMANS).unwrap();
        let before = db.clone();
        assert_eq!(db.upsert(&name("alice"), MANAGED, fields("h")), Err(Refused::Unmanaged));
        assert_eq!(db.remove(&name("bob"), MANAGED), Err(Refused::Unmanaged));
        assert_eq!(db.remove(&name("carol"), MANAGED), Err(Refused::Unknown));
        assert_eq!(db, before, "refused changes change nothing");

        assert_eq!(db.upsert(&name("agent-a"), MANAGED, fields("h1")), Ok(Upserted::Created));
        assert_eq!(db.upsert(&name("agent-a"), MANAGED, fields("h2")), Ok(Upserted::Updated));
        assert_eq!(db.upsert(&name("agent-a"), MANAGED, fields("h2")), Ok(Upserted::Unchanged));
        assert_eq!(db.managed_hash(&name("agent-a"), MANAGED), Ok(Some("h2".into())));
        let reread = Database::parse(&db.to_yaml().unwrap()).unwrap();
        let view = reread.user(&name("agent-a"), MANAGED).unwrap().unwrap();
        assert!(view.managed && !view.disabled && view.groups == ["dev", MANAGED]);
        for human in ["alice", "bob"] {
            assert_eq!(reread.users().unwrap().get(human), before.users().unwrap().get(human), "{human}");
        }
        assert_eq!(reread.root.get("other_top_level"), before.root.get("other_top_level"));

        reread.clone().remove(&name("agent-a"), MANAGED).unwrap();
        let mut removed = reread;
        removed.remove(&name("agent-a"), MANAGED).unwrap();
        assert_eq!(Database::parse(&removed.to_yaml().unwrap()).unwrap(), before);
    }

    /// Strings that YAML could read as something else, or that need quoting or escaping.
    fn tricky_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "\\PC{0,16}",
            prop::sample::select(vec![
                "yes",
                "No",
                "on",
                "OFF",
                "y",
                "~",
                "null",
                "NULL",
                "true",
                "012",
                "0x1F",
                "0o17",
                "1e3",
                ".inf",
                "-.nan",
                " lead",
                "trail ",
                "a: b",
                "#c",
                "- x",
                "? q",
                "two\nlines",
                "'q'",
                "\"dq\"",
                "*alias",
                "&anchor",
                "!tag",
                "%d",
                "@at",
                "`tick",
                "{}",
                "[]",
                "",
                "\t",
                "é\u{2028}x",
                "$argon2id$v=19$m=65536,t=3,p=4$abc$def",
            ])
            .prop_map(str::to_owned),
        ]
    }

    fn yaml_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            tricky_text().prop_map(Value::String),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| Value::Number(n.into())),
            Just(Value::Null),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Sequence),
                prop::collection::vec((tricky_text(), inner), 0..4)
                    .prop_map(|pairs| Value::Mapping(pairs.into_iter().map(|(k, v)| (Value::String(k), v)).collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Whatever people keep in the file comes back with the same meaning after the bridge
        /// adds and removes its own user.
        #[test]
        fn other_users_survive_a_write_whatever_they_hold(
            users in prop::collection::btree_map("[a-z]{1,8}", prop::collection::vec((tricky_text(), yaml_value()), 0..6), 0..5),
            top in prop::collection::vec(("[a-z]{1,6}", yaml_value()), 0..3),
        ) {
            let mut root = Mapping::new();
            let users: Mapping = users
                .into_iter()
                .map(|(name, fields)| {
                    let user: Mapping = fields.into_iter().map(|(k, v)| (Value::String(k), v)).collect();
                    (Value::String(name), Value::Mapping(user))
                })
                .collect();
            root.insert(key("users"), Value::Mapping(users));
            for (k, v) in top {
                if k != "users" {
                    root.insert(Value::String(k), v);
                }
            }
            let text = yaml_serde::to_string(&root).unwrap();
            let mut db = Database::parse(&text).unwrap();
            prop_assert_eq!(&db.root, &root);
            prop_assert_eq!(db.upsert(&name("agent-x"), MANAGED, fields("h")), Ok(Upserted::Created));
            let written = Database::parse(&db.to_yaml().unwrap()).unwrap();
            let mut without = written.clone();
            without.remove(&name("agent-x"), MANAGED).unwrap();
            prop_assert_eq!(&without.root, &root);
            prop_assert!(written.is_managed(&name("agent-x"), MANAGED) == Some(true));
        }
    }

    #[test]
    fn a_users_field_of_the_wrong_type_is_named() {
        let db = Database::parse("users:\n  x:\n    groups: admins\n    disabled: maybe\n").unwrap();
        let err = db.user(&name("x"), MANAGED).unwrap_err().0;
        assert!(err.contains("users.x.groups is not a list"), "{err}");
    }
}
