//! The scheduler configuration file (YAML): profiles with their plugins and score weights,
//! the queueing policy and search of each, search settings, priority classes and GPU link
//! layouts. Parsing and validation only; `plugins::build_profile` turns a profile into
//! plugin objects.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use crate::framework::{SearchMode, SearchOptions};
use crate::model::{LinkMatrix, LinkProfile, parse_topo_matrix};
use crate::plugins::ZoneConfig;
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
    /// The inference dedicated zone of the `e-spread` plugin.
    #[serde(default)]
    pub inference_zone: Option<ZoneConfig>,
}

/// The placement strategies `--placement` chooses between: each is a score plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Placement {
    /// Most-allocated first.
    Binpack,
    /// Kant's enhanced binpack: fill holes of busy leaf groups, keep a job's pods together.
    EBinpack,
    /// Least-allocated first.
    Spread,
    /// E-Binpack, with inference spread over the profile's inference zone.
    ESpread,
}

impl Placement {
    pub const ALL: [Placement; 4] = [
        Placement::Binpack,
        Placement::EBinpack,
        Placement::Spread,
        Placement::ESpread,
    ];

    /// The score plugin that implements it.
    pub fn plugin(self) -> &'static str {
        match self {
            Placement::Binpack => "binpack",
            Placement::EBinpack => "e-binpack",
            Placement::Spread => "spread",
            Placement::ESpread => "e-spread",
        }
    }
}

impl ProfileConfig {
    /// The profile with its placement scorers replaced by `placement`'s, at the weight of
    /// the first one replaced (1 if the profile had none).
    pub fn with_placement(&self, placement: Placement) -> ProfileConfig {
        let is_placement = |p: &PluginConfig| Placement::ALL.iter().any(|s| s.plugin() == p.name());
        let weight = self
            .plugins
            .iter()
            .find(|p| is_placement(p))
            .and_then(PluginConfig::weight);
        let mut plugins: Vec<PluginConfig> = self
            .plugins
            .iter()
            .filter(|p| !is_placement(p))
            .cloned()
            .collect();
        plugins.push(PluginConfig::Weighted {
            name: placement.plugin().to_owned(),
            weight,
        });
        ProfileConfig {
            plugins,
            ..self.clone()
        }
    }
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
    /// Exact layouts by GPU model, as `nvidia-smi topo -m` prints them.
    #[serde(default)]
    pub topologies: HashMap<String, String>,
}

impl Default for LinksConfig {
    fn default() -> Self {
        Self {
            default: LinkProfile::NvlinkAll,
            by_model: HashMap::new(),
            topologies: HashMap::new(),
        }
    }
}

impl LinksConfig {
    /// The `topologies` parsed; the error names the GPU model and what is wrong.
    pub fn parsed_topologies(&self) -> Result<HashMap<String, Arc<LinkMatrix>>, String> {
        self.topologies
            .iter()
            .map(|(model, text)| {
                let owner = format!("links.topologies.{model}");
                let matrix = parse_topo_matrix(&owner, text).map_err(|e| e.to_string())?;
                Ok((model.clone(), Arc::new(matrix)))
            })
            .collect()
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
        config.links.parsed_topologies().map_err(error)?;
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
    fn placement_replaces_the_scorer_only() {
        let config = Config::embedded();
        let default = config.profile("default").unwrap();
        let spread = default.with_placement(Placement::Spread);
        let names: Vec<&str> = spread.plugins.iter().map(PluginConfig::name).collect();
        assert_eq!(
            names,
            [
                "priority-sort",
                "node-pool",
                "resource-fit",
                "gpu-devices",
                "gang",
                "gpu-topology",
                "spread"
            ]
        );
        assert_eq!(spread.plugins[6].weight(), Some(1));
        assert!(crate::plugins::build_profile(&spread, config.search).is_ok());
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
    fn a_malformed_topology_names_its_model() {
        let matrix = r#""\tGPU0\tGPU1\nGPU0\t X \tNVX\nGPU1\tNVX\t X \n""#;
        let text = format!("{DEFAULT_CONFIG}  topologies:\n    L40S: {matrix}\n");
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert!(
            err.contains("links.topologies.L40S") && err.contains("NVX"),
            "{err}"
        );
        let good = text.replace("NVX", "NV4");
        let config = Config::parse("kant.yaml", &good).expect("valid topology");
        let topologies = config.links.parsed_topologies().expect("parsed");
        assert_eq!(topologies["L40S"].devices(), 2);
    }

    #[test]
    fn unknown_field_and_missing_allocator_are_refused() {
        let err = Config::parse("c.yaml", "default_profile: p\nprofiles: []\nbogus: 1\n");
        assert!(err.unwrap_err().to_string().contains("bogus"));
        let err = Config::parse("c.yaml", &with_plugins("[priority-sort]")).unwrap_err();
        assert!(err.to_string().contains("gpu-devices"), "{err}");
    }
}
