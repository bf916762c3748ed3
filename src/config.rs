//! The scheduler configuration file (YAML): profiles with their plugins and score weights,
//! the queueing policy and search of each, search settings, priority classes and GPU link
//! layouts. Parsing and validation only; `plugins::build_profile` turns a profile into
//! plugin objects.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::framework::{SearchMode, SearchOptions};
use crate::model::LinkProfile;
use crate::queue::QueueingPolicy;

/// The configuration compiled into the binary.
pub const DEFAULT_CONFIG: &str = include_str!("default_config.yaml");

/// A configuration that cannot be used; the message names the file and what was wrong.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct ConfigError {
    pub source_name: String,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub default_profile: String,
    pub profiles: Vec<ProfileConfig>,
    #[serde(default)]
    pub search: SearchOptions,
    #[serde(default)]
    pub priority_classes: HashMap<String, i32>,
    #[serde(default)]
    pub links: LinksConfig,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    pub name: String,
    pub queueing: QueueingPolicy,
    pub search: SearchMode,
    pub plugins: Vec<PluginConfig>,
}

/// A plugin by name, or with a score weight.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PluginConfig {
    Name(String),
    Weighted {
        name: String,
        #[serde(default)]
        weight: Option<i64>,
    },
}

impl PluginConfig {
    pub fn name(&self) -> &str {
        match self {
            PluginConfig::Name(name) | PluginConfig::Weighted { name, .. } => name,
        }
    }

    pub fn weight(&self) -> Option<i64> {
        match self {
            PluginConfig::Name(_) => None,
            PluginConfig::Weighted { weight, .. } => *weight,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinksConfig {
    pub default: LinkProfile,
    #[serde(default)]
    pub by_model: HashMap<String, LinkProfile>,
}

impl Default for LinksConfig {
    fn default() -> Self {
        Self {
            default: LinkProfile::NvlinkAll,
            by_model: HashMap::new(),
        }
    }
}

impl Config {
    /// The embedded default configuration.
    pub fn embedded() -> Config {
        Self::parse("embedded default configuration", DEFAULT_CONFIG)
            .expect("the embedded configuration is valid (checked by a test)")
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            source_name: name.clone(),
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(&name, &text)
    }

    /// Parses and validates a configuration; every profile is built once to prove it.
    pub fn parse(source_name: &str, text: &str) -> Result<Config, ConfigError> {
        let error = |message: String| ConfigError {
            source_name: source_name.to_owned(),
            message,
        };
        let config: Config = serde_saphyr::from_str(text)
            .map_err(|e| error(e.to_string().lines().next().unwrap_or("").to_owned()))?;
        if config.profiles.is_empty() {
            return Err(error("no profiles".into()));
        }
        for profile in &config.profiles {
            crate::plugins::build_profile(profile, config.search).map_err(error)?;
        }
        if config.profile(&config.default_profile).is_none() {
            return Err(error(format!(
                "default_profile `{}` is not one of the profiles",
                config.default_profile
            )));
        }
        Ok(config)
    }

    pub fn profile(&self, name: &str) -> Option<&ProfileConfig> {
        self.profiles.iter().find(|p| p.name == name)
    }

    pub fn profile_names(&self) -> Vec<&str> {
        self.profiles.iter().map(|p| p.name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_configuration_is_valid() {
        let config = Config::embedded();
        assert_eq!(config.profile_names(), ["default", "native"]);
        assert_eq!(config.priority_classes["LS"], 100);
    }

    fn with_plugins(plugins: &str) -> String {
        format!(
            "default_profile: p\nprofiles:\n  - name: p\n    queueing: strict-fifo\n    \
             search: flat\n    plugins: {plugins}\n"
        )
    }

    #[test]
    fn unknown_plugin_is_named() {
        let text = with_plugins("[priority-sort, gpu-devices, best-fit]");
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert!(
            err.starts_with("kant.yaml: profile p: unknown plugin `best-fit`"),
            "{err}"
        );
    }

    #[test]
    fn negative_weight_is_refused() {
        let text = with_plugins("[priority-sort, gpu-devices, {name: binpack, weight: -2}]");
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert!(err.contains("weight -2 of `binpack` is negative"), "{err}");
    }

    #[test]
    fn unknown_field_and_missing_allocator_are_refused() {
        let err = Config::parse("c.yaml", "default_profile: p\nprofiles: []\nbogus: 1\n");
        assert!(err.unwrap_err().to_string().contains("bogus"));
        let err = Config::parse("c.yaml", &with_plugins("[priority-sort]")).unwrap_err();
        assert!(err.to_string().contains("gpu-devices"), "{err}");
    }
}
