//! The scheduler configuration file (YAML): profiles with their plugins and score weights,
//! the queueing policy and search of each, search settings, priority classes and GPU link
//! layouts. Parsing and validation only; `plugins::build_profile` turns a profile into
//! plugin objects.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use crate::framework::{SearchMode, SearchOptions};
use crate::model::{LinkMatrix, LinkProfile, parse_topo_matrix};
use crate::plugins::ZoneConfig;
use crate::queue::{DEFAULT_TENANT, MAX_TENANTS, QueueingPolicy, TenantConfig};

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
    pub queueing: QueueSettings,
    /// Tenants with their quotas; none: every job in the default tenant, which may use
    /// the whole cluster.
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
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

/// Settings of the queue side shared by every profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueSettings {
    /// How long the head of a backfill queue waits, blocked, before room is made for it
    /// (a duration: `30m`, `1800s`, `2h`); also how long any job waits, blocked, before a
    /// quota reclaim for it may take a borrower's job that holds more than its tenant
    /// borrows.
    #[serde(deserialize_with = "duration_ms::<0, _>")]
    pub backfill_threshold: u64,
    /// A job placed less than this long ago is never preempted, so a preemptor is not
    /// evicted in turn before it has run (no cycle). A victim may still preempt jobs of
    /// lower priority than its own in its turn.
    #[serde(deserialize_with = "duration_ms::<1, _>")]
    pub min_runtime: u64,
    /// The first wait of a job requeued after a failed binding; it doubles per failure.
    #[serde(deserialize_with = "duration_ms::<2, _>")]
    pub requeue_backoff: u64,
    /// The longest such wait.
    #[serde(deserialize_with = "duration_ms::<3, _>")]
    pub requeue_backoff_max: u64,
    /// Between jobs of equal priority and submission time, which size goes first.
    pub size_order: SizeOrder,
}

/// The tie-break of the queue order on job size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SizeOrder {
    SmallerFirst,
    LargerFirst,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            backfill_threshold: 30 * 60 * 1000,
            min_runtime: 10 * 60 * 1000,
            requeue_backoff: 10 * 1000,
            requeue_backoff_max: 10 * 60 * 1000,
            size_order: SizeOrder::SmallerFirst,
        }
    }
}

/// Parses a duration such as `30m`, `1800s`, `2h`, `1d`, `250ms` or a plain number of
/// seconds, into milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "ms" => 1.0,
        "" | "s" => 1e3,
        "m" | "min" => 60e3,
        "h" => 3600e3,
        "d" => 86_400e3,
        _ => f64::NAN,
    };
    let value: f64 = number.parse().unwrap_or(f64::NAN);
    let ms = value * scale;
    if ms.is_finite() && ms >= 0.0 && ms < u64::MAX as f64 {
        Ok(ms.round() as u64)
    } else {
        Err(format!(
            "`{text}` is not a duration (for example 30m, 1800s, 2h, 250ms)"
        ))
    }
}

/// The keys of [`QueueSettings`]' durations, for their errors: `duration_ms::<I, _>` reads
/// the `I`th.
const DURATION_KEYS: [&str; 4] = [
    "backfill_threshold",
    "min_runtime",
    "requeue_backoff",
    "requeue_backoff_max",
];

/// A duration as [`parse_duration_ms`] reads it, written as text or as a plain number
/// (seconds); an error names the key.
fn duration_ms<'de, const KEY: usize, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<u64, D::Error> {
    let Scalar(text) = Scalar::deserialize(deserializer)?;
    parse_duration_ms(&text)
        .map_err(|e| serde::de::Error::custom(format!("queueing.{}: {e}", DURATION_KEYS[KEY])))
}

/// `search.topology_patience_s`: a whole number of seconds; an error names the key.
pub(crate) fn whole_seconds<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<u64, D::Error> {
    let Scalar(text) = Scalar::deserialize(deserializer)?;
    text.parse().map_err(|_| {
        serde::de::Error::custom(format!(
            "search.topology_patience_s: `{text}` is not a whole number of seconds (for \
             example 600)"
        ))
    })
}

/// Whether a trace's `priority` column holding `text` is read as a number (an optional
/// sign and digits, and perhaps a fraction of zeros) rather than as the name of a
/// priority class.
pub fn is_priority_number(text: &str) -> bool {
    let text = without_zero_fraction(text);
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A whole number written as a float (`8.0`, as a table tool writes a column with empty
/// cells), as the whole number; other text as it is.
pub fn without_zero_fraction(text: &str) -> &str {
    match text.split_once('.') {
        Some((whole, zeros))
            if !whole.is_empty() && !zeros.is_empty() && zeros.bytes().all(|b| b == b'0') =>
        {
            whole
        }
        _ => text,
    }
}

/// A YAML scalar as text, whatever its type (null is empty), so that the error of a value
/// that is not what it should be can quote it.
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = String;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or text")
            }
            fn visit_str<E>(self, text: &str) -> Result<String, E> {
                Ok(text.to_owned())
            }
            fn visit_u64<E>(self, number: u64) -> Result<String, E> {
                Ok(number.to_string())
            }
            fn visit_i64<E>(self, number: i64) -> Result<String, E> {
                Ok(number.to_string())
            }
            fn visit_f64<E>(self, number: f64) -> Result<String, E> {
                // `1e300` stays short.
                Ok(format!("{number:?}"))
            }
            fn visit_bool<E>(self, value: bool) -> Result<String, E> {
                Ok(value.to_string())
            }
            fn visit_unit<E>(self) -> Result<String, E> {
                Ok(String::new())
            }
        }
        deserializer.deserialize_any(Text).map(Scalar)
    }
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
    /// the first one replaced (1 if the profile had none); its inference zone goes unless
    /// `placement` is E-Spread, the one that uses it.
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
            inference_zone: (self.inference_zone.clone())
                .filter(|_| placement == Placement::ESpread),
            ..self.clone()
        }
    }
}

/// A plugin by name, or with a score weight.
#[derive(Debug, Clone)]
pub enum PluginConfig {
    Name(String),
    Weighted { name: String, weight: Option<i64> },
}

/// A plugin's name, or `{name: NAME, weight: N}`. An unknown key, or a weight that is not
/// a whole number, is an error naming the plugin.
impl<'de> Deserialize<'de> for PluginConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entry;
        impl<'de> serde::de::Visitor<'de> for Entry {
            type Value = PluginConfig;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a plugin name, or {name: NAME, weight: N}")
            }
            fn visit_str<E>(self, name: &str) -> Result<PluginConfig, E> {
                Ok(PluginConfig::Name(name.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<PluginConfig, A::Error> {
                use serde::de::Error;
                let (mut name, mut weight, mut unknown) = (None, None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "name" => name = Some(map.next_value::<String>()?),
                        "weight" => weight = Some(map.next_value::<Scalar>()?.0),
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            unknown.get_or_insert(key);
                        }
                    }
                }
                let name = name.ok_or_else(|| A::Error::custom("a plugin entry has no name"))?;
                if let Some(key) = unknown {
                    return Err(A::Error::custom(format!(
                        "plugin `{name}`: unknown key `{key}` (an entry has name and weight)"
                    )));
                }
                let weight = weight
                    .map(|text| {
                        text.parse().map_err(|_| {
                            A::Error::custom(format!(
                                "weight `{text}` of `{name}` is not a whole number from 0 to 100"
                            ))
                        })
                    })
                    .transpose()?;
                Ok(PluginConfig::Weighted { name, weight })
            }
        }
        deserializer.deserialize_any(Entry)
    }
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

#[derive(Debug, Clone, PartialEq, Deserialize)]
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
        let config: Config =
            serde_saphyr::from_str(text).map_err(|e| error(yaml_error(&e.to_string(), text)))?;
        if config.profiles.is_empty() {
            return Err(error("no profiles".into()));
        }
        if let Some(name) = first_repeat(config.profiles.iter().map(|p| p.name.as_str())) {
            return Err(error(format!("profile `{name}` is declared twice")));
        }
        if let Some(name) = first_repeat(config.tenants.iter().map(|t| t.name.as_str())) {
            return Err(error(format!("tenant {name} is declared twice")));
        }
        let others = config.tenants.iter().filter(|t| t.name != DEFAULT_TENANT);
        if let Some(tenant) = others.clone().nth(MAX_TENANTS - 1) {
            return Err(error(format!(
                "tenant {}: more than {MAX_TENANTS} tenants, the default one included ({} \
                 declared)",
                tenant.name,
                config.tenants.len()
            )));
        }
        for profile in &config.profiles {
            crate::plugins::build_profile(profile, &config).map_err(error)?;
        }
        for tenant in &config.tenants {
            tenant.validate().map_err(error)?;
        }
        let queueing = &config.queueing;
        if queueing.requeue_backoff > queueing.requeue_backoff_max {
            let seconds = |ms: u64| ms as f64 / 1000.0;
            return Err(error(format!(
                "queueing.requeue_backoff ({} s) is longer than queueing.requeue_backoff_max \
                 ({} s)",
                seconds(queueing.requeue_backoff),
                seconds(queueing.requeue_backoff_max)
            )));
        }
        let numbers = config.priority_classes.keys();
        if let Some(name) = numbers.filter(|name| is_priority_number(name)).min() {
            return Err(error(format!(
                "priority_classes: class `{name}` is a number: a trace's priority `{name}` \
                 is read as that number, never as the class (give the class a name with a \
                 letter)"
            )));
        }
        let unnamable = |name: &&String| {
            name.is_empty() || name.trim() != name.as_str() || name.contains(['\n', '\r'])
        };
        if let Some(name) = config.priority_classes.keys().filter(unnamable).min() {
            return Err(error(format!(
                "priority_classes: class {name:?} is empty, has spaces around it or a line \
                 break: a trace's priority is read trimmed (and empty as 0), on one line, \
                 never as the class"
            )));
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

    /// What a valid profile does that its reader may not expect, one line each.
    pub fn cautions(&self) -> Vec<String> {
        let makes_no_room = |p: &ProfileConfig| {
            p.queueing == QueueingPolicy::Backfill
                && !(p.plugins.iter())
                    .any(|plugin| matches!(plugin.name(), "preemption" | "backfill-preemption"))
        };
        let flat = (self.profiles.iter())
            .filter(|p| p.search == SearchMode::Flat)
            .map(|p| format!("profile `{}`: {FLAT_SEARCH_CAUTION}", p.name));
        let backfill = (self.profiles.iter())
            .filter(|p| makes_no_room(p))
            .map(|p| {
                format!(
                    "profile `{}`: {BACKFILL_WITHOUT_PREEMPTION_CAUTION}",
                    p.name
                )
            });
        flat.chain(backfill).collect()
    }
}

/// What backfill without a preemption plugin leaves out.
const BACKFILL_WITHOUT_PREEMPTION_CAUTION: &str = "`queueing: backfill` without \
     `backfill-preemption` or `preemption` holds room for an overdue head only once its \
     pools have enough free; short of room, the head waits as under best-effort";

/// What the flat search (the baseline's) leaves out.
pub const FLAT_SEARCH_CAUTION: &str = "`search: flat`, the baseline's search, ignores jobs' \
     required topology (a job that requires one leaf, spine or scale-up domain may cross \
     it) and the room held for backfill heads";

/// The YAML parser's error in the file's terms: its first line (the rest draws the same
/// line), without the "error: " the command line adds or advice meant for the parser's
/// callers, Rust's type names said in words, and the line it points at quoted, so that the
/// key and value are named.
fn yaml_error(message: &str, text: &str) -> String {
    let first = message.lines().next().unwrap_or("");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let first = [", set DuplicateKeyPolicy", "; use from_str_multiple"]
        .iter()
        .fold(first, |m, advice| m.split(advice).next().unwrap_or(m));
    let mut said = first.to_owned();
    for (rust, words) in [
        ("invalid i64", "not a whole number (or out of range)"),
        ("invalid i32", "not a whole number (or out of range)"),
        (
            "invalid u64",
            "not a whole number at least 0 (or out of range)",
        ),
        (
            "invalid u32",
            "not a whole number at least 0 (or out of range)",
        ),
        ("invalid f64", "not a number"),
    ] {
        if said.ends_with(rust) {
            said.replace_range(said.len() - rust.len().., words);
        }
    }
    let line = (first.strip_prefix("line "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| text.lines().nth(n.checked_sub(1)?))
        .map(str::trim)
        .filter(|line| !line.is_empty());
    match line {
        Some(line) => format!("{said}: `{line}`"),
        None => said,
    }
}

/// The first of `names` that an earlier one repeats.
fn first_repeat<'a>(mut names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::HashSet::new();
    names.find(|name| !seen.insert(*name))
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
                "node-affinity",
                "taint-toleration",
                "resource-fit",
                "gpu-devices",
                "pod-affinity",
                "topology-spread",
                "gang",
                "backfill-preemption",
                "gpu-topology",
                "spread"
            ]
        );
        assert_eq!(spread.plugins[11].weight(), Some(1));
        assert!(crate::plugins::build_profile(&spread, &config).is_ok());
    }

    #[test]
    fn durations_parse_or_say_why_not() {
        assert_eq!(parse_duration_ms("30m"), Ok(1_800_000));
        assert_eq!(parse_duration_ms("1800"), Ok(1_800_000));
        assert_eq!(parse_duration_ms("1.5h"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        for bad in ["", "soon", "-5m", "3 weeks", "m"] {
            assert!(parse_duration_ms(bad).is_err(), "{bad} accepted");
        }
        let text = DEFAULT_CONFIG.replace(
            "backfill_threshold: 30m",
            "backfill_threshold: half an hour",
        );
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert!(
            err.contains("half an hour") && err.contains("not a duration"),
            "{err}"
        );
    }

    #[test]
    fn a_plain_number_is_seconds_and_a_bad_one_names_its_key() {
        let queueing = |key: &str, value: &str| {
            let line = DEFAULT_CONFIG
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{key}:")))
                .expect("the key is in the embedded configuration");
            let text = DEFAULT_CONFIG.replace(line, &format!("  {key}: {value}"));
            Config::parse("kant.yaml", &text).map(|c| c.queueing)
        };
        let settings = queueing("backfill_threshold", "1.5").expect("1.5 s");
        assert_eq!(settings.backfill_threshold, 1_500);
        let settings = queueing("min_runtime", "1e3").expect("1000 s");
        assert_eq!(settings.min_runtime, 1_000_000);
        for key in DURATION_KEYS {
            for bad in ["-5", "1e300", "true", ""] {
                let err = queueing(key, bad).unwrap_err().to_string();
                assert!(
                    err.contains(&format!("queueing.{key}: `{bad}` is not a duration")),
                    "{err}"
                );
            }
        }
    }

    #[test]
    fn a_requeue_backoff_longer_than_its_maximum_is_refused() {
        let text = DEFAULT_CONFIG.replace("requeue_backoff: 10s", "requeue_backoff: 20m");
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert_eq!(
            err,
            "kant.yaml: queueing.requeue_backoff (1200 s) is longer than \
             queueing.requeue_backoff_max (600 s)"
        );
        let text = DEFAULT_CONFIG.replace("requeue_backoff: 10s", "requeue_backoff: 10m");
        assert!(Config::parse("kant.yaml", &text).is_ok(), "equal is fine");
    }

    #[test]
    fn a_priority_class_a_trace_would_read_as_a_number_is_refused() {
        for name in ["12", "-3", "+7", "8.0", "-1.00"] {
            let text = DEFAULT_CONFIG.replace("  BE: 0", &format!("  \"{name}\": 7"));
            let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
            assert!(
                err.contains(&format!("priority_classes: class `{name}` is a number")),
                "{err}"
            );
        }
        // Nor can one the trace's trimmed column never holds.
        // (YAML's "\n" in a double-quoted key is a line break.)
        for (yaml, name) in [("", ""), (" BE", " BE"), ("BE ", "BE "), ("B\\nE", "B\nE")] {
            let text = DEFAULT_CONFIG.replace("  BE: 0", &format!("  \"{yaml}\": 7"));
            let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
            assert!(
                err.contains(&format!("class {name:?} is empty, has spaces around it")),
                "{err}"
            );
        }
        for name in ["P12", "8.5"] {
            let text = DEFAULT_CONFIG.replace("  BE: 0", &format!("  \"{name}\": 7"));
            assert!(Config::parse("kant.yaml", &text).is_ok(), "{name}");
        }
    }

    #[test]
    fn a_topology_patience_that_is_not_whole_seconds_names_its_key() {
        for bad in ["10m", "1.5", "-1", "ten"] {
            let text = DEFAULT_CONFIG.replace(
                "topology_patience_s: 600",
                &format!("topology_patience_s: {bad}"),
            );
            let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
            assert!(
                err.contains("search.topology_patience_s: ")
                    && err.contains("is not a whole number of seconds"),
                "{bad}: {err}"
            );
        }
        let text = DEFAULT_CONFIG.replace("topology_patience_s: 600", "topology_patience_s: 0");
        let config = Config::parse("kant.yaml", &text).expect("0 s is valid");
        assert_eq!(config.search.topology_patience_s, 0);
    }

    #[test]
    fn a_yaml_error_names_the_file_and_line_once() {
        let err = Config::parse("kant.yaml", "default_profile: p\nprofiles: [\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("kant.yaml: line 2 column"), "{text}");
        assert!(!text.contains("error"), "{text}");
    }

    /// A value of the wrong type names its key and value (the line is quoted) in words,
    /// and the parser's advice to its own callers is left out.
    #[test]
    fn a_yaml_error_quotes_its_line_in_the_files_terms() {
        let fractional =
            format!("{DEFAULT_CONFIG}tenants:\n  - name: a\n    quota: {{A100: 8.5}}\n");
        let err = Config::parse("kant.yaml", &fractional)
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("not a whole number (or out of range): `quota: {A100: 8.5}`"),
            "{err}"
        );
        let twice = format!("{DEFAULT_CONFIG}default_profile: native\n");
        let err = Config::parse("kant.yaml", &twice).unwrap_err().to_string();
        assert!(
            err.ends_with("duplicate mapping key: default_profile: `default_profile: native`"),
            "{err}"
        );
    }

    #[test]
    fn a_profile_or_tenant_declared_twice_is_named() {
        let text = DEFAULT_CONFIG.replace("  - name: native", "  - name: default");
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert_eq!(err, "kant.yaml: profile `default` is declared twice");
        for name in ["team-a", "default"] {
            let text = format!("{DEFAULT_CONFIG}tenants:\n  - name: {name}\n  - name: {name}\n");
            let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
            assert_eq!(err, format!("kant.yaml: tenant {name} is declared twice"));
        }
    }

    /// More tenants than a replay can tell apart are refused with the file, not only
    /// once a replay resolves them.
    #[test]
    fn more_tenants_than_can_be_told_apart_are_refused() {
        let tenants = |count: usize| -> String {
            let names: String = (0..count).map(|i| format!("  - name: t{i}\n")).collect();
            format!("{DEFAULT_CONFIG}tenants:\n  - name: default\n{names}")
        };
        assert!(Config::parse("kant.yaml", &tenants(MAX_TENANTS - 1)).is_ok());
        let err = (Config::parse("kant.yaml", &tenants(MAX_TENANTS)))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "kant.yaml: tenant t{}: more than {MAX_TENANTS} tenants, the default one \
                 included ({} declared)",
                MAX_TENANTS - 1,
                MAX_TENANTS + 1
            )
        );
    }

    /// Backfill without a preemption plugin is noted: short of room, its head waits as
    /// under best-effort.
    #[test]
    fn backfill_without_preemption_is_noted() {
        let embedded = Config::parse("kant.yaml", DEFAULT_CONFIG).unwrap();
        assert_eq!(embedded.cautions().len(), 1, "the flat baseline's alone");
        let text = DEFAULT_CONFIG.replace("      - backfill-preemption\n", "");
        let config = Config::parse("kant.yaml", &text).unwrap();
        let cautions = config.cautions();
        assert_eq!(cautions.len(), 2, "{cautions:?}");
        assert!(
            cautions[1].starts_with("profile `default`: `queueing: backfill` without"),
            "{cautions:?}"
        );
    }

    /// A tenant no trace row could name: the trace's tenant column is read trimmed.
    #[test]
    fn a_tenant_named_with_spaces_around_is_refused() {
        let text = format!("{DEFAULT_CONFIG}tenants:\n  - name: \" team-a\"\n");
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert!(
            err.contains("tenant \" team-a\": spaces around the name"),
            "{err}"
        );
    }

    #[test]
    fn a_negative_quota_is_refused() {
        let text = format!("{DEFAULT_CONFIG}tenants:\n  - name: team-a\n    quota: {{H100: -8}}\n");
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert!(
            err.contains("tenant team-a: quota -8 of H100 is negative"),
            "{err}"
        );
        let huge = text.replace("-8", "6148914691236518");
        let err = Config::parse("kant.yaml", &huge).unwrap_err().to_string();
        assert!(
            err.contains(
                "tenant team-a: quota 6148914691236518 of H100 is more than 4294967296 GPUs"
            ),
            "{err}"
        );
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

    /// A list that could mean two things is refused rather than read one way: a plugin
    /// twice (a scorer counted twice?), two device allocators (which one?), an inference
    /// zone without the plugin that uses it.
    #[test]
    fn an_ambiguous_plugin_list_is_refused() {
        let err = |plugins: &str, zone: &str| {
            let text = format!("{}{zone}", with_plugins(plugins));
            Config::parse("kant.yaml", &text).unwrap_err().to_string()
        };
        let twice = err("[priority-sort, gpu-devices, binpack, binpack]", "");
        assert!(
            twice.contains("profile p: `binpack` is listed twice"),
            "{twice}"
        );
        let both = err("[priority-sort, gpu-devices, first-fit-devices]", "");
        assert!(
            both.contains("`gpu-devices` and `first-fit-devices` both assign GPU devices"),
            "{both}"
        );
        let zone = "    inference_zone: {gpu_models: [H100]}\n";
        let orphan = err("[priority-sort, gpu-devices, binpack]", zone);
        assert!(orphan.contains("`inference_zone` is set but the profile has no `e-spread`"));
        let empty = err(
            "[priority-sort, gpu-devices, e-spread]",
            "    inference_zone: {allow_training: true}\n",
        );
        assert!(
            empty.contains("`inference_zone` names no `nodes`, `gpu_models` or `labels`"),
            "{empty}"
        );
    }

    #[test]
    fn an_overflowing_weight_is_refused() {
        let text = with_plugins(
            "[priority-sort, gpu-devices, {name: binpack, weight: 9223372036854775807}]",
        );
        let err = Config::parse("kant.yaml", &text).unwrap_err().to_string();
        assert!(err.contains("is above 100"), "{err}");
    }

    #[test]
    fn a_plugin_entry_names_its_unknown_key_or_bad_weight() {
        let parse = |entry: &str| {
            let text = with_plugins(&format!("[priority-sort, gpu-devices, {entry}]"));
            Config::parse("kant.yaml", &text).map_err(|e| e.to_string())
        };
        let err = parse("{name: binpack, weigth: 5}").unwrap_err();
        assert!(
            err.contains("plugin `binpack`: unknown key `weigth`"),
            "{err}"
        );
        let err = parse("{weigth: 5, name: binpack}").unwrap_err();
        assert!(err.contains("unknown key `weigth`"), "{err}");
        for bad in ["2.5", "heavy", "1e20"] {
            let err = parse(&format!("{{name: binpack, weight: {bad}}}")).unwrap_err();
            assert!(
                err.contains(&format!(
                    "weight `{bad}` of `binpack` is not a whole number"
                )),
                "{err}"
            );
        }
        let err = parse("{weight: 5}").unwrap_err();
        assert!(err.contains("a plugin entry has no name"), "{err}");
        let config = parse("{name: binpack, weight: 5}").expect("valid");
        let weights: Vec<Option<i64>> = config.profiles[0]
            .plugins
            .iter()
            .map(PluginConfig::weight)
            .collect();
        assert_eq!(weights, [None, None, Some(5)]);
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
