//! Agents' labels on the command line: `swarmctl agent label AGENT team=infra old-` (set and
//! remove, as one merge patch), `--label team=infra` on `agent create`, and `swarmctl agents
//! --label team=infra` (or `--label team`: has the key) to list only matching agents.

use std::collections::BTreeMap;
use std::str::FromStr;

use hyper::http::Method;
use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::labels::{Labels, check_key, check_label};
use hyperhive_swarm_api::agents::LabelsView;
use hyperhive_swarm_api::paths;

use super::client::{self, Api, CtlError};
use super::format::pretty_answer;

/// `KEY=VALUE`: one label, checked as the controller checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The key.
    pub key: String,
    /// The value (may be empty).
    pub value: String,
}

impl FromStr for Label {
    type Err = String;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        let (key, value) =
            word.split_once('=').ok_or_else(|| format!("{word:?} is not KEY=VALUE (e.g. team=infra)"))?;
        check_label(key, value).map_err(|e| e.to_string())?;
        Ok(Self { key: key.to_owned(), value: value.to_owned() })
    }
}

/// One word of `agent label`: `KEY=VALUE` sets, `KEY-` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelChange {
    /// Set the label.
    Set(Label),
    /// Remove the key.
    Remove(String),
}

impl FromStr for LabelChange {
    type Err = String;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        if !word.contains('=')
            && let Some(key) = word.strip_suffix('-')
        {
            check_key(key).map_err(|e| e.to_string())?;
            return Ok(Self::Remove(key.to_owned()));
        }
        word.parse::<Label>()
            .map(Self::Set)
            .map_err(|e| format!("{e}; write KEY=VALUE to set a label, KEY- to remove one"))
    }
}

/// A label filter: `KEY=VALUE` (that value), or `KEY` (any value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    key: String,
    value: Option<String>,
}

impl FromStr for Selector {
    type Err = String;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        match word.split_once('=') {
            Some(_) => word.parse::<Label>().map(|l| Self { key: l.key, value: Some(l.value) }),
            None => check_key(word).map(|()| Self { key: word.to_owned(), value: None }).map_err(|e| e.to_string()),
        }
    }
}

impl Selector {
    /// Whether `labels` match.
    #[must_use]
    pub fn matches(&self, labels: &Labels) -> bool {
        labels.get(&self.key).is_some_and(|v| self.value.as_ref().is_none_or(|want| want == v))
    }
}

/// Labels as the tables show them: `team=infra,tier=gold`, or `-`.
#[must_use]
pub fn shown(labels: &Labels) -> String {
    if labels.is_empty() {
        return "-".into();
    }
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// `swarmctl agent label AGENT CHANGE...`: one merge patch; prints the labels after it.
///
/// # Errors
/// The API's (an unknown agent, a refused label, too many).
pub async fn change(api: &Api, agent: &AgentName, changes: &[LabelChange], as_json: bool) -> Result<String, CtlError> {
    let patch: BTreeMap<&str, Option<&str>> = changes
        .iter()
        .map(|c| match c {
            LabelChange::Set(l) => (l.key.as_str(), Some(l.value.as_str())),
            LabelChange::Remove(key) => (key.as_str(), None),
        })
        .collect();
    let path = paths::agent_labels(agent);
    let bytes = client::request(api, Method::PATCH, &path, None, Some(client::body(&patch))).await?;
    if as_json {
        return pretty_answer(&bytes);
    }
    let answer: LabelsView = client::answer(&bytes)?;
    Ok(format!("{}: {}\n", answer.agent, shown(&answer.labels)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_set_or_remove_and_bad_words_say_how_to_write_them() {
        assert_eq!(
            "team=infra".parse::<LabelChange>(),
            Ok(LabelChange::Set(Label { key: "team".into(), value: "infra".into() }))
        );
        assert_eq!(
            "note=".parse::<LabelChange>(),
            Ok(LabelChange::Set(Label { key: "note".into(), value: "".into() }))
        );
        assert_eq!("team-".parse::<LabelChange>(), Ok(LabelChange::Remove("team".into())));
        // A value ending in '-' is a value, not a removal.
        assert_eq!(
            "zone=eu-".parse::<LabelChange>(),
            Ok(LabelChange::Set(Label { key: "zone".into(), value: "eu-".into() }))
        );
        for (word, says) in [("team", "KEY- to remove"), ("Team=x", "\"Team\""), ("t=a\nb", "value"), ("-", "\"\"")] {
            let err = word.parse::<LabelChange>().unwrap_err();
            assert!(err.contains(says), "{word:?}: {err}");
        }
    }

    #[test]
    fn a_selector_matches_a_value_or_a_key() {
        let labels = Labels::from([("team".into(), "infra".into())]);
        assert!("team=infra".parse::<Selector>().unwrap().matches(&labels));
        assert!("team".parse::<Selector>().unwrap().matches(&labels));
        assert!(!"team=web".parse::<Selector>().unwrap().matches(&labels));
        assert!(!"tier".parse::<Selector>().unwrap().matches(&labels));
        assert!("Team".parse::<Selector>().is_err());
        assert_eq!(shown(&labels), "team=infra");
        assert_eq!(shown(&Labels::new()), "-");
    }
}
