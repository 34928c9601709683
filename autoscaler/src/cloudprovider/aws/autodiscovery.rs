//! `--node-group-auto-discovery=asg:tag=<key>[=<value>],...` (upstream's
//! `parseASGAutoDiscoverySpec`). A key alone matches any value. Several
//! specs are merged into one set of tags that an ASG must all carry (AWS
//! ANDs the filters), as upstream does.

use std::collections::BTreeMap;

/// Why an auto-discovery spec was refused (upstream's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// No `<discoverer>:<key>=<value>` shape.
    #[error(
        "invalid node group auto discovery spec specified via --node-group-auto-discovery: {0}"
    )]
    Invalid(String),
    /// Not `asg`.
    #[error("unsupported discoverer specified: {0}")]
    Discoverer(String),
    /// Not `key=value`.
    #[error("invalid key=value pair {0}")]
    Pair(String),
    /// Not `tag`.
    #[error(
        "unsupported parameter key \"{0}\" is specified for discoverer \"asg\". The only supported key is \"tag\""
    )]
    Key(String),
    /// `asg:tag=`.
    #[error("tag value not supplied")]
    NoTags,
}

/// The tags every discovered ASG carries: key → value (empty: any value).
pub fn parse(specs: &[String]) -> Result<BTreeMap<String, String>, DiscoveryError> {
    let mut tags = BTreeMap::new();
    for spec in specs {
        tags.extend(parse_one(spec)?);
    }
    Ok(tags)
}

fn parse_one(spec: &str) -> Result<BTreeMap<String, String>, DiscoveryError> {
    let (discoverer, rest) = spec
        .split_once(':')
        .ok_or_else(|| DiscoveryError::Invalid(spec.to_string()))?;
    if discoverer != "asg" {
        return Err(DiscoveryError::Discoverer(discoverer.to_string()));
    }
    let (key, value) = rest
        .split_once('=')
        .ok_or_else(|| DiscoveryError::Pair(rest.to_string()))?;
    if key != "tag" {
        return Err(DiscoveryError::Key(key.to_string()));
    }
    if value.is_empty() {
        return Err(DiscoveryError::NoTags);
    }
    Ok(value
        .split(',')
        .map(|item| match item.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (item.to_string(), String::new()),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_alone_match_any_value_and_specs_merge() {
        assert_eq!(
            parse(&[
                "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod".into()
            ]),
            Ok(tags(&[
                ("k8s.io/cluster-autoscaler/enabled", ""),
                ("k8s.io/cluster-autoscaler/prod", "")
            ]))
        );
        assert_eq!(
            parse(&[
                "asg:tag=my:label=value".into(),
                "asg:tag=label=value,anothertag".into()
            ]),
            Ok(tags(&[
                ("my:label", "value"),
                ("label", "value"),
                ("anothertag", "")
            ]))
        );
    }

    #[test]
    fn bad_specs_say_why() {
        let err = |s: &str| parse(&[s.to_string()]).unwrap_err().to_string();
        assert_eq!(
            err("asg"),
            "invalid node group auto discovery spec specified via --node-group-auto-discovery: asg"
        );
        assert_eq!(err("mig:tag=a"), "unsupported discoverer specified: mig");
        assert_eq!(err("asg:tag"), "invalid key=value pair tag");
        assert_eq!(
            err("asg:label=a"),
            "unsupported parameter key \"label\" is specified for discoverer \"asg\". The only supported key is \"tag\""
        );
        assert_eq!(err("asg:tag="), "tag value not supplied");
    }
}
