//! The `kant` command line: `run` schedules a Kubernetes cluster's pods, `simulate`
//! replays a workload through the same scheduler core and reports the Kant metrics,
//! `crds` prints the custom resource definitions, `config check` validates a
//! configuration file.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use clap::{Args, Parser, Subcommand, ValueEnum};

use kant::config::{Config, FLAT_SEARCH_CAUTION, Placement};
use kant::framework::SearchMode;
use kant::model::ClusterSpec;
use kant::plugins::build_profile;
use kant::queue::{DEFAULT_TENANT, QueueingPolicy, Tenants};
use kant::sim::report::{JsonReport, table};
use kant::sim::synthetic::{
    SyntheticOptions, assign_tenants, default_cluster, default_tenants, generate_workload,
};
use kant::sim::{
    EventLog, PastTheClock, ReplayOptions, TraceOptions, Workload, fill_workload, run,
    scale_arrivals, trace,
};

#[derive(Parser)]
#[command(
    name = "kant",
    version,
    about = "Kant: a unified scheduler for large AI GPU clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedule the pods of a Kubernetes cluster that name this scheduler.
    Run(Box<RunArgs>),
    /// Replay a workload (a trace, or the embedded default) and report GAR, SOR, GFR, JWTD
    /// and JTTED, beside the same workload under a baseline profile.
    Simulate(Box<SimulateArgs>),
    /// Validate a configuration file.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Print the custom resource definitions (Queue, PodGroup) as YAML.
    Crds,
}

#[derive(Args)]
struct RunArgs {
    /// A kubeconfig file; otherwise `KUBECONFIG`, or else the in-cluster configuration.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Configuration file (YAML); otherwise `KANT_CONFIG` when set and not empty, or
    /// else the embedded default.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Whether `config` came from `KANT_CONFIG`, which its errors then name.
    #[arg(skip)]
    config_from_env: bool,
    /// Profile to run; the configuration's default_profile otherwise.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Pods opt in with this spec.schedulerName.
    #[arg(long, value_name = "NAME", default_value = "kant-scheduler", value_parser = scheduler_name)]
    scheduler_name: String,
    /// This replica's node-pool shard; its replicas elect a leader on the Lease
    /// kant-scheduler-<SHARD>.
    #[arg(long, value_name = "NAME", default_value = "all", value_parser = shard_name)]
    shard: String,
    /// GPU models (values of nvidia.com/gpu.product) this shard schedules, comma
    /// separated; none: every model.
    #[arg(long, value_name = "MODELS", value_delimiter = ',', value_parser = gpu_model)]
    gpu_models: Vec<String>,
    /// Also take pods that name no GPU model (always on without --gpu-models). Every
    /// shard places its gangs' pods without GPUs on CPU-only nodes.
    #[arg(long)]
    default_shard: bool,
    /// Address of /metrics.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:9090")]
    metrics_addr: std::net::SocketAddr,
    /// Address of /healthz and /readyz.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8081")]
    health_addr: std::net::SocketAddr,
    /// Namespace of the shard's Lease.
    #[arg(long, value_name = "NS", default_value = "kube-system", value_parser = namespace)]
    lease_namespace: String,
    /// This replica's identity in the Lease (default: `POD_NAME` when set and not empty,
    /// else the host name and a random suffix, unique per process, as client-go's leader
    /// election makes it).
    #[arg(long, value_name = "ID", value_parser = identity)]
    identity: Option<String>,
    /// Schedule at once, without leader election (a single replica).
    #[arg(long)]
    no_leader_election: bool,
    /// Bindings and evictions in flight at most.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max_binds_in_flight: u32,
    /// Status writes (pod conditions, events, PodGroup and Queue status) per second.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    status_qps: u32,
    /// Seconds a binding, an eviction or a status write waits for the API server's answer;
    /// also how long a replica that takes over an expired Lease places nothing, while the
    /// bindings its leader sent may still land.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    api_timeout: u64,
    /// Node label of the leaf switch group.
    #[arg(long, value_name = "KEY", default_value = "kant.io/leaf", value_parser = label_key)]
    leaf_label: String,
    /// Node label of the spine.
    #[arg(long, value_name = "KEY", default_value = "kant.io/spine", value_parser = label_key)]
    spine_label: String,
    /// Node label of the superspine.
    #[arg(long, value_name = "KEY", default_value = "kant.io/superspine", value_parser = label_key)]
    superspine_label: String,
    /// Node label of the scale-up (HBD) domain.
    #[arg(long, value_name = "KEY", default_value = "kant.io/hbd", value_parser = label_key)]
    hbd_label: String,
}

#[derive(Subcommand)]
enum ConfigAction {
    /// Parse and validate FILE; prints its profiles, exits 2 on any error.
    Check { file: PathBuf },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Args)]
struct SimulateArgs {
    /// Trace nodes.csv (with --jobs); without both, the embedded default cluster.
    #[arg(long, value_name = "FILE", requires = "jobs")]
    nodes: Option<PathBuf>,
    /// Trace jobs.csv (with --nodes); without both, a synthetic workload.
    #[arg(long, value_name = "FILE", requires = "nodes")]
    jobs: Option<PathBuf>,
    /// Seed of the synthetic workload (default 42), and of the tenants
    /// --synthetic-tenants gives a trace's jobs.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Number of jobs in the synthetic workload (default 4000, at most four million, as
    /// many as a trace may hold); ignored, with a warning, for a trace.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=trace::MAX_TRACE_JOBS as i64))]
    synthetic_jobs: Option<u32>,
    /// Divide inter-arrival times by X (2 doubles the offered load).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    load_factor: f64,
    /// Fill the cluster, as the FGD paper measures fragmentation: the jobs arrive one
    /// second apart in submission order, repeated until their GPU demand reaches the
    /// cluster's GPUs; none finishes, and one that does not fit when it arrives is
    /// dropped. Reports the GPUs allocated as each tenth of the cluster's GPUs arrives.
    #[arg(long, conflicts_with = "load_factor")]
    fill: bool,
    /// Configuration file (YAML); otherwise `KANT_CONFIG` when set and not empty, or
    /// else the embedded default.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Whether `config` came from `KANT_CONFIG`, which its errors then name.
    #[arg(skip)]
    config_from_env: bool,
    /// Profile to run; the configuration's default_profile otherwise.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Placement strategy of the profile run (replaces its placement scorer).
    #[arg(long, value_enum)]
    placement: Option<Placement>,
    /// Queueing policy of the profile run (replaces the profile's).
    #[arg(long, value_enum)]
    queueing: Option<QueueingPolicy>,
    /// Give a trace's jobs that name no tenant to the synthetic tenants (a seeded hash of
    /// the job name, by the tenants' shares), with the synthetic tenants' quotas. The
    /// embedded default always has them. Ignored when the configuration declares tenants.
    #[arg(long)]
    synthetic_tenants: bool,
    /// Profile to run beside it on the same workload, or `none`.
    #[arg(long, value_name = "NAME", default_value = "native")]
    baseline: String,
    /// Output format on standard output.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write every event of the main run as JSON Lines to FILE.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Write the simulated cluster and workload as nodes.csv and jobs.csv into DIR.
    #[arg(long, value_name = "DIR")]
    write_trace: Option<PathBuf>,
}

/// Bad input (exit 2, nothing written), or a failure while writing results or while
/// running (exit 1).
enum Failure {
    Input(String),
    Output(String),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal, not in a file or a container's log.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `kant`, `kant config`: what the commands are.
            let _ = e.print();
            return ExitCode::from(2);
        }
        Err(e) => {
            // One line: clap's message and tips up to its usage block, joined.
            let text = e.to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|line| !line.starts_with("Usage:"))
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect();
            eprintln!("{}", message.join(" "));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Run(mut args) => {
            (args.config, args.config_from_env) = config_or_env(args.config);
            args.identity = args.identity.or_else(|| env_value("POD_NAME"));
            run_scheduler(*args)
        }
        Command::Simulate(mut args) => {
            (args.config, args.config_from_env) = config_or_env(args.config);
            simulate(*args)
        }
        Command::Crds => print_out(&kant::kube::crd::crd_manifests()),
        Command::Config {
            action: ConfigAction::Check { file },
        } => check_config(&file),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Output(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

/// The seed of the synthetic workload and tenants when `--seed` is not given.
const DEFAULT_SEED: u64 = 42;

/// An environment variable that stands for an option not given: unset and empty alike
/// mean nothing (`KANT_CONFIG=` in a manifest must not break every run).
fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// A `--gpu-models` entry: a `nvidia.com/gpu.product` value, spaces around it dropped.
fn gpu_model(text: &str) -> Result<String, String> {
    let model = text.trim();
    if model.is_empty() {
        return Err("an empty GPU model (a stray comma, or an empty list?)".into());
    }
    Ok(model.to_owned())
}

/// A `--shard` name: it ends the Lease's name, a DNS subdomain, so lower-case letters,
/// digits, '-' and '.', starting and ending with a letter or digit, the whole name at most
/// 253 characters.
fn shard_name(text: &str) -> Result<String, String> {
    if !is_dns_subdomain(text, 253 - "kant-scheduler-".len()) {
        return Err(format!(
            "{text:?}: a shard's name ends its Lease's name (kant-scheduler-<SHARD>), so it is \
             lower-case letters, digits, '-' or '.', starting and ending with a letter or digit"
        ));
    }
    Ok(text.to_owned())
}

/// A `--scheduler-name`: what pods name in `spec.schedulerName`, a DNS subdomain, and what
/// Kant's events name as their reporting controller, which the API server takes only up
/// to 63 characters (a qualified name without a prefix).
fn scheduler_name(text: &str) -> Result<String, String> {
    if !is_dns_subdomain(text, 63) {
        return Err(format!(
            "{text:?}: pods name their scheduler in lower-case letters, digits, '-' or '.', \
             starting and ending with a letter or digit, and Kant's events name it as their \
             reporting controller, which the API server takes only up to 63 characters"
        ));
    }
    Ok(text.to_owned())
}

/// A `--lease-namespace`: a namespace's name, a DNS label (a DNS subdomain without dots,
/// at most 63 characters).
fn namespace(text: &str) -> Result<String, String> {
    if text.contains('.') || !is_dns_subdomain(text, 63) {
        return Err(format!(
            "{text:?}: a namespace's name is lower-case letters, digits or '-', starting and \
             ending with a letter or digit, at most 63 characters"
        ));
    }
    Ok(text.to_owned())
}

/// An `--identity`: not empty, as a Lease whose holder is empty is held by no one (the
/// replica would take its own Lease for a free one, and never stand down).
fn identity(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err(format!(
            "{text:?}: a replica's identity names it as its Lease's holder, so it cannot be \
             empty"
        ));
    }
    Ok(text.to_owned())
}

/// A node label key (`--leaf-label` and the like), as Kubernetes takes one: a name of at
/// most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit,
/// after an optional DNS subdomain prefix and '/'. A key no node can carry would leave
/// every node outside every group, silently.
fn label_key(text: &str) -> Result<String, String> {
    let (prefix, name) = match text.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, text),
    };
    let name_ok = name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && (name.chars()).all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok || !prefix.is_none_or(|p| is_dns_subdomain(p, 253)) {
        return Err(format!(
            "{text:?}: a label key is a name of at most 63 letters, digits, '-', '_' or '.', \
             starting and ending with a letter or digit, after an optional DNS subdomain \
             prefix and '/' (kant.io/leaf)"
        ));
    }
    Ok(text.to_owned())
}

/// Whether `text` is a DNS subdomain of at most `max_len` characters: dot-separated
/// labels of lower-case letters, digits and '-', each starting and ending with a letter
/// or digit.
fn is_dns_subdomain(text: &str, max_len: usize) -> bool {
    let label = |label: &str| {
        label.starts_with(|c: char| c.is_ascii_alphanumeric())
            && label.ends_with(|c: char| c.is_ascii_alphanumeric())
            && (label.chars()).all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    text.len() <= max_len && text.split('.').all(label)
}

/// `--config`, else `KANT_CONFIG`, and whether it is the variable's.
fn config_or_env(given: Option<PathBuf>) -> (Option<PathBuf>, bool) {
    match given {
        Some(path) => (Some(path), false),
        None => {
            let from_env = env_value("KANT_CONFIG").map(PathBuf::from);
            let is_env = from_env.is_some();
            (from_env, is_env)
        }
    }
}

/// The configuration file `path` names, or the embedded one; an error names
/// `KANT_CONFIG` where the path is its value (one left set in a shell surprises).
fn load_config(path: Option<&Path>, from_env: bool) -> Result<Config, Failure> {
    let Some(path) = path else {
        return Ok(Config::embedded());
    };
    Config::load(path).map_err(|e| match from_env {
        true => Failure::Input(format!("{e} (the file KANT_CONFIG names, {path:?})")),
        false => Failure::Input(e.to_string()),
    })
}

fn run_scheduler(args: RunArgs) -> Result<(), Failure> {
    let config = load_config(args.config.as_deref(), args.config_from_env)?;
    if !config.tenants.is_empty() {
        let names: Vec<&str> = config.tenants.iter().map(|t| t.name.as_str()).collect();
        tracing::warn!(
            "the configuration's tenants ({}) are ignored: `kant run` takes its tenants from \
             Queue objects (kant.io/v1alpha1), one per tenant",
            names.join(", ")
        );
    }
    let profile_name = args.profile.as_deref().unwrap_or(&config.default_profile);
    if config
        .profile(profile_name)
        .is_some_and(|p| p.search == SearchMode::Flat)
    {
        tracing::warn!("profile `{profile_name}`: {FLAT_SEARCH_CAUTION}");
    }
    let mut options = kant::kube::RunOptions::new(config);
    options.kubeconfig = args.kubeconfig;
    options.profile = args.profile;
    options.world.scheduler_name = args.scheduler_name;
    options.world.default_shard = args.default_shard || args.gpu_models.is_empty();
    options.world.shard_models = args.gpu_models;
    options.world.topology_keys = kant::kube::convert::TopologyKeys {
        leaf: args.leaf_label,
        spine: args.spine_label,
        superspine: args.superspine_label,
        hbd: args.hbd_label,
    };
    options.world.shard = args.shard;
    options.lease_namespace = args.lease_namespace;
    if let Some(identity) = args.identity {
        options.identity = identity;
    }
    options.leader_election = !args.no_leader_election;
    options.metrics_addr = args.metrics_addr;
    options.health_addr = args.health_addr;
    options.max_in_flight = args.max_binds_in_flight as usize;
    options.status_qps = args.status_qps;
    options.api_timeout = std::time::Duration::from_secs(args.api_timeout);
    // A panic anywhere (the scheduling loop, a watch, a binding) ends the process, to be
    // restarted: a replica whose loop died but whose Lease renewal ran on would keep its
    // shard from being scheduled by any replica.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |panic| {
        report(panic);
        std::process::abort();
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Output(e.to_string()))?;
    let signals = StopSignals::register(&runtime).map_err(|e| Failure::Output(e.to_string()))?;
    runtime
        .block_on(kant::kube::run(
            options,
            async move {
                signals.recv().await;
            },
            None,
        ))
        .map_err(|e| match e {
            kant::kube::RunError::Setup(_) => Failure::Input(e.to_string()),
            kant::kube::RunError::Stopped(_) => Failure::Output(e.to_string()),
        })
}

/// SIGINT and SIGTERM (what Kubernetes sends to stop a pod), caught from the moment they
/// are registered: neither ends the process by itself from then on.
struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Registers both with `runtime`, now.
    fn register(runtime: &tokio::runtime::Runtime) -> std::io::Result<StopSignals> {
        let _entered = runtime.enter();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(StopSignals {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopSignals {})
    }

    /// Completes on the first to come, with the exit status a process ended by that
    /// signal reports (128 + its number).
    async fn recv(#[cfg_attr(not(unix), allow(unused_mut))] mut self) -> u8 {
        #[cfg(unix)]
        let status = tokio::select! {
            _ = self.interrupt.recv() => 130,
            _ = self.terminate.recv() => 143,
        };
        #[cfg(not(unix))]
        let status = {
            let _ = tokio::signal::ctrl_c().await;
            130
        };
        tracing::info!("shutting down");
        status
    }
}

fn check_config(file: &Path) -> Result<(), Failure> {
    let config = Config::load(file).map_err(|e| Failure::Input(e.to_string()))?;
    let mut text = format!(
        "{}: valid; profiles {} (default {})\n",
        file.display(),
        config.profile_names().join(", "),
        config.default_profile
    );
    for caution in config.cautions() {
        text += &format!("note: {caution}\n");
    }
    print_out(&text)
}

/// Writes `text` to standard output: one closed early (`| head`) is an output failure,
/// not a panic.
fn print_out(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    (stdout.write_all(text.as_bytes()))
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::Output(e.to_string()))
}

fn simulate(args: SimulateArgs) -> Result<(), Failure> {
    end_on_interrupt();
    let input = |e: String| Failure::Input(e);
    let config = load_config(args.config.as_deref(), args.config_from_env)?;
    // `hint` ends the message of a profile the configuration does not have.
    let profile_named = |name: &str, placement: Option<Placement>, hint: &str| {
        let profile = config.profile(name).ok_or_else(|| {
            input(format!(
                "no profile `{name}` in the configuration (profiles: {}){hint}",
                config.profile_names().join(", ")
            ))
        })?;
        let profile = match placement {
            Some(p) => profile.with_placement(p),
            None => profile.clone(),
        };
        build_profile(&profile, &config).map_err(input)
    };
    let main_name = args.profile.as_deref().unwrap_or(&config.default_profile);
    let mut main_profile = profile_named(main_name, args.placement, "")?;
    if let Some(queueing) = args.queueing {
        main_profile.queueing = queueing;
    }
    main_profile.name = run_name(main_name, args.placement, args.queueing);
    let baseline = match args.baseline.as_str() {
        "none" => None,
        name if name == main_name && args.placement.is_none() && args.queueing.is_none() => None,
        name => Some(profile_named(
            name,
            None,
            "; --baseline names the profile run beside it, `native` unless given: give \
             another, or --baseline none",
        )?),
    };
    if !(args.load_factor.is_finite() && args.load_factor > 0.0) {
        return Err(input(format!(
            "--load-factor {} must be a positive number",
            args.load_factor
        )));
    }
    check_outputs(&args)?;
    let (cluster, mut workload, source) = load_workload(&args, &config)?;
    scale_arrivals(&mut workload, args.load_factor)
        .map_err(|e| input(format!("--load-factor {:?}: {e}", args.load_factor)))?;
    let synthetic_tenants = args.synthetic_tenants || args.nodes.is_none();
    if args.synthetic_tenants && !config.tenants.is_empty() {
        tracing::warn!("--synthetic-tenants is ignored: the configuration declares the tenants");
    }
    let tenant_configs = if !config.tenants.is_empty() {
        config.tenants.clone()
    } else if synthetic_tenants {
        if args.nodes.is_some() {
            assign_tenants(&mut workload, args.seed.unwrap_or(DEFAULT_SEED));
        }
        default_tenants(&cluster)
    } else {
        Vec::new()
    };
    // Declared tenants are the configuration file's: an error names it.
    let declared_in = match (&args.config, config.tenants.is_empty()) {
        (Some(path), false) => format!("{}: ", path.display()),
        _ => String::new(),
    };
    let tenants = Tenants::resolve(&tenant_configs, &cluster)
        .map_err(|e| input(format!("{declared_in}{e}")))?;
    // A replay cannot hold every isolated quota: its isolated tenants would not be.
    let oversubscribed = tenants.isolated_oversubscription(&cluster);
    if !oversubscribed.is_empty() {
        let lines: Vec<String> = oversubscribed.iter().map(|o| o.to_string()).collect();
        return Err(input(format!("{declared_in}{}", lines.join("; "))));
    }
    if args.fill {
        workload = fill_workload(&workload, cluster.total_milli())
            .map_err(|e| input(format!("--fill: {e}")))?;
    }
    // After the fill, which replays the rows without a duration too.
    warn_unknown_tenants(&workload, &tenants, args.nodes.is_some());
    let cluster = Arc::new(cluster);

    // Every output is opened before the replay, so that one that cannot be written fails at
    // once; each is staged beside its file and replaces it only once the whole run is done.
    let report_file = args.out.as_deref().map(Output::create).transpose()?;
    let (event_output, mut events) = match &args.events {
        Some(path) => {
            let (output, file) = Output::create(path)?;
            (Some(output), EventLog::new(Some(Box::new(file))))
        }
        None => (None, EventLog::disabled()),
    };
    let mut staged = match &args.write_trace {
        Some(dir) => write_trace(dir, &cluster, &workload)?,
        None => Vec::new(),
    };
    let progress = std::io::stderr().is_terminal();
    let output = |e: std::io::Error| Failure::Output(e.to_string());
    // A replay that would run past the clock fails for its input, not its outputs.
    let past_the_clock =
        |e: &std::io::Error| (e.get_ref()?.downcast_ref::<PastTheClock>()).map(ToString::to_string);
    // One after the other, so that neither run's wall time is measured under the other's
    // load.
    let main_run = run(
        cluster.clone(),
        &workload,
        main_profile,
        tenants.clone(),
        &mut events,
        ReplayOptions {
            progress,
            fill: args.fill,
            ..ReplayOptions::default()
        },
    )
    .map_err(|e| match (past_the_clock(&e), &event_output) {
        (Some(message), _) => Failure::Input(message),
        (None, Some(log)) => log.failed(e),
        // The event log is all a replay writes.
        (None, None) => output(e),
    })?;
    staged.extend(event_output);
    let baseline_run = baseline
        .map(|profile| {
            run(
                cluster.clone(),
                &workload,
                profile,
                tenants,
                &mut EventLog::disabled(),
                ReplayOptions {
                    fill: args.fill,
                    ..ReplayOptions::default()
                },
            )
        })
        .transpose()
        .map_err(|e| match past_the_clock(&e) {
            Some(message) => Failure::Input(format!(
                "the baseline profile {}: {message} (`--baseline none` replays without it)",
                args.baseline
            )),
            None => output(e),
        })?;

    let unknown_capacity = cluster.nodes_with_unknown_capacity();
    let json = JsonReport {
        nodes_unknown_capacity: unknown_capacity,
        main: &main_run,
        baseline: baseline_run.as_ref(),
    };
    if let Some((report, mut file)) = report_file {
        serde_json::to_writer_pretty(&mut file, &json)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(file))
            .and_then(|()| file.flush())
            .map_err(|e| report.failed(e))?;
        staged.push(report);
    }
    let mut stdout = std::io::stdout().lock();
    let printed = match args.format {
        Format::Json => serde_json::to_writer(&mut stdout, &json)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(stdout)),
        Format::Table => {
            let mut runs = vec![&main_run];
            runs.extend(baseline_run.as_ref());
            let unknown = if unknown_capacity > 0 {
                " (CPU or memory unknown on some nodes: counted as unlimited)"
            } else {
                ""
            };
            let title = format!(
                "{source}: {} nodes, {} GPUs{unknown}; {} jobs",
                cluster.nodes.len(),
                cluster.total_gpus(),
                main_run.jobs_total
            );
            writeln!(stdout, "{}", table(&title, &runs))
        }
    };
    printed.map_err(output)?;
    Output::commit_all(staged)?;
    warn_never_placed(&main_run);
    if main_run.metrics.gar_mean.is_none() && main_run.metrics.jobs_submitted > 0 {
        eprintln!(
            "the metrics window (first to last submission) has no length: every job was \
             submitted at one instant, so GAR, SOR and GFR, averages over it, are undefined \
             (- in the table, null in the JSON)"
        );
    }
    Ok(())
}

/// The name the main run is reported under: its profile's, with what `--placement` and
/// `--queueing` replaced in it, so that it is not mistaken for the profile as configured
/// (which may be the baseline run beside it).
fn run_name(
    profile: &str,
    placement: Option<Placement>,
    queueing: Option<QueueingPolicy>,
) -> String {
    let replaced: Vec<String> = [
        ("placement", placement.and_then(|p| p.to_possible_value())),
        ("queueing", queueing.and_then(|q| q.to_possible_value())),
    ]
    .into_iter()
    .filter_map(|(flag, value)| Some(format!("{flag} {}", value?.get_name())))
    .collect();
    if replaced.is_empty() {
        profile.to_owned()
    } else {
        format!("{profile} ({})", replaced.join(", "))
    }
}

/// The jobs the main run never placed, with why, on standard error: the first few, and
/// where to find the rest.
fn warn_never_placed(run: &kant::sim::RunReport) {
    const SHOWN: usize = 5;
    let jobs = &run.never_placed;
    if jobs.is_empty() {
        return;
    }
    let count = match jobs.len() {
        1 => "1 job was".to_owned(),
        n => format!("{n} jobs were"),
    };
    eprintln!("{count} never placed by profile {}:", run.profile);
    for job in jobs.iter().take(SHOWN) {
        eprintln!("  {}: {}", job.job, job.reason);
    }
    if jobs.len() > SHOWN {
        eprintln!(
            "  and {} more (all of them under `never_placed` in the JSON report)",
            jobs.len() - SHOWN
        );
    }
}

/// The tenants the workload's jobs name that the configuration does not declare, on
/// standard error: their jobs go to the default tenant (the report counts them as
/// `jobs_unknown_tenant`).
fn warn_unknown_tenants(workload: &Workload, tenants: &Tenants, trace: bool) {
    let mut jobs_per_tenant = vec![0usize; workload.tenants.len()];
    for job in &workload.jobs {
        if let Some(count) = jobs_per_tenant.get_mut(job.tenant.index()) {
            *count += 1;
        }
    }
    let unknown: Vec<String> = workload
        .tenants
        .iter()
        .zip(jobs_per_tenant)
        .filter(|(name, jobs)| *jobs > 0 && tenants.index(name).is_none())
        .map(|(name, jobs)| format!("`{name}` ({jobs})"))
        .collect();
    if !unknown.is_empty() {
        let or = if trace {
            ", or give the trace --synthetic-tenants and no `tenants:`"
        } else {
            ""
        };
        tracing::warn!(
            "jobs name tenants the configuration does not declare: {}; they go to the \
             `{DEFAULT_TENANT}` tenant (declare the tenants under `tenants:` in --config{or})",
            unknown.join(", ")
        );
    }
}

/// The trace named on the command line, or the embedded default cluster with a synthetic
/// workload; with a description for the report's title.
fn load_workload(
    args: &SimulateArgs,
    config: &Config,
) -> Result<(ClusterSpec, Workload, String), Failure> {
    let options = TraceOptions {
        links_by_model: config.links.by_model.clone(),
        default_links: config.links.default,
        // Validated when the configuration was parsed.
        topologies: config.links.parsed_topologies().map_err(Failure::Input)?,
        priority_classes: config.priority_classes.clone(),
        ..TraceOptions::default()
    };
    match (&args.nodes, &args.jobs) {
        (Some(nodes), Some(jobs)) => {
            if args.synthetic_jobs.is_some() {
                tracing::warn!("--synthetic-jobs is ignored: the jobs are those of the trace");
            }
            if args.seed.is_some() && !args.synthetic_tenants {
                tracing::warn!(
                    "--seed is ignored: it seeds the synthetic workload, and a trace's \
                     tenants only with --synthetic-tenants"
                );
            }
            let input = |e: kant::sim::TraceError| Failure::Input(e.to_string());
            let cluster = trace::read_nodes(nodes, &options).map_err(input)?;
            // A model misspelt in a configuration file's links is warned of (the embedded
            // one's serve any trace).
            let models: std::collections::BTreeSet<&String> = (config.links.by_model.keys())
                .chain(config.links.topologies.keys())
                .collect();
            for model in models.into_iter().filter(|_| args.config.is_some()) {
                if cluster.pool_of_model(Some(model)).is_none() {
                    tracing::warn!(
                        "the configuration's links name GPU model `{model}`, which no node of \
                         {} has",
                        nodes.display()
                    );
                }
            }
            let workload = trace::read_jobs(jobs, &cluster, &options).map_err(input)?;
            Ok((cluster, workload, format!("trace {}", jobs.display())))
        }
        _ => {
            let unset = [
                Config::embedded().links,
                kant::config::LinksConfig::default(),
            ];
            if args.config.is_some() && !unset.contains(&config.links) {
                tracing::warn!(
                    "the configuration's links are for trace nodes: the embedded default \
                     cluster's layouts are its own (H100 NVSwitch, A100 NVLink pairs)"
                );
            }
            let cluster = default_cluster();
            let defaults = SyntheticOptions::default();
            let synthetic = SyntheticOptions {
                seed: args.seed.unwrap_or(DEFAULT_SEED),
                jobs: args.synthetic_jobs.map_or(defaults.jobs, |n| n as usize),
                ..defaults
            };
            let workload = generate_workload(&cluster, &synthetic);
            let source = format!(
                "embedded default (seed {})",
                args.seed.unwrap_or(DEFAULT_SEED)
            );
            Ok((cluster, workload, source))
        }
    }
}

/// Refuses a run that would write over one of its inputs, or write two outputs to one
/// file: files are compared as the file system resolves them. A device or pipe
/// (`/dev/null`) may take several outputs.
fn check_outputs(args: &SimulateArgs) -> Result<(), Failure> {
    let trace_file = |name: &str| args.write_trace.as_ref().map(|dir| dir.join(name));
    let inputs = [
        ("--nodes", args.nodes.clone()),
        ("--jobs", args.jobs.clone()),
        ("--config", args.config.clone()),
    ];
    let outputs = [
        ("--write-trace", trace_file("nodes.csv")),
        ("--write-trace", trace_file("jobs.csv")),
        ("--out", args.out.clone()),
        ("--events", args.events.clone()),
    ];
    let mut taken: Vec<(&str, PathBuf)> = inputs
        .into_iter()
        .filter_map(|(flag, path)| Some((flag, resolved(&path?)?)))
        .collect();
    for (flag, path) in outputs {
        let Some(file) = path.as_deref().and_then(resolved) else {
            continue;
        };
        let device = std::fs::metadata(&file).is_ok_and(|m| !m.is_file() && !m.is_dir());
        if device {
            continue;
        }
        if let Some((other, _)) = taken.iter().find(|(_, taken)| *taken == file) {
            return Err(Failure::Input(format!(
                "{flag} would write over {}, which {other} also names",
                file.display()
            )));
        }
        taken.push((flag, file));
    }
    Ok(())
}

/// The file `path` names, links resolved; for a file not there yet, its folder's (`None`
/// when that is not there either: no file can be there yet).
fn resolved(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok().or_else(|| {
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
        let folder = folder.unwrap_or(Path::new(".")).canonicalize().ok()?;
        Some(folder.join(path.file_name()?))
    })
}

/// Writes the simulated cluster and workload as `nodes.csv` and `jobs.csv` into `dir`
/// (made if missing), staged: both are committed together or neither.
fn write_trace(
    dir: &Path,
    cluster: &ClusterSpec,
    workload: &Workload,
) -> Result<Vec<Output>, Failure> {
    if dir.exists() && !dir.is_dir() {
        return Err(Failure::Output(format!(
            "{}: not a directory (--write-trace names the directory that gets nodes.csv and \
             jobs.csv)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| Failure::Output(format!("{}: {e}", dir.display())))?;
    let (nodes, file) = Output::create(&dir.join("nodes.csv"))?;
    trace::write_nodes_to(file, cluster).map_err(|e| nodes.failed(e))?;
    let (jobs, file) = Output::create(&dir.join("jobs.csv"))?;
    trace::write_jobs_to(file, workload, cluster).map_err(|e| jobs.failed(e))?;
    Ok(vec![nodes, jobs])
}

/// A failure to write the output at `path`, naming it.
fn write_failure(path: &Path, error: impl std::fmt::Display) -> Failure {
    Failure::Output(format!("{}: {error}", path.display()))
}

/// An output file of `simulate`, written whole or not at all: it is written to a staging
/// file in the same folder, which [`Output::commit`] renames onto it once the whole run
/// has succeeded, and which is removed when the output is dropped uncommitted. A path
/// that is there but is not a regular file (`/dev/stdout`, a pipe) is written directly:
/// there is nothing there to keep.
struct Output {
    /// The path as given, which errors name.
    path: PathBuf,
    /// The staging file and the file it replaces (links resolved); none when written
    /// directly.
    staged: Option<(PathBuf, PathBuf)>,
}

impl Output {
    /// Opens `path` for writing, or fails naming it.
    fn create(path: &Path) -> Result<(Output, BufWriter<File>), Failure> {
        let failed = |e| write_failure(path, e);
        let existing = match std::fs::metadata(path) {
            Ok(metadata) if !metadata.is_file() => {
                // A folder fails here, naming the file.
                let file = File::create(path).map_err(failed)?;
                let output = Output {
                    path: path.to_owned(),
                    staged: None,
                };
                return Ok((output, BufWriter::new(file)));
            }
            Ok(metadata) => {
                // A file this run may not write is refused now, as writing it would be,
                // rather than replaced; opening it changes nothing.
                OpenOptions::new().write(true).open(path).map_err(failed)?;
                Some(metadata)
            }
            Err(_) => None,
        };
        let target = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        let mut name = std::ffi::OsString::from(".");
        name.push(target.file_name().unwrap_or_default());
        name.push(format!(".kant-{}.tmp", std::process::id()));
        let staging = target.with_file_name(name);
        let mut staging_files = staging_files();
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staging)
            .map_err(failed)?;
        staging_files.push(staging.clone());
        drop(staging_files);
        // From here on, dropping the output removes the staging file.
        let output = Output {
            path: path.to_owned(),
            staged: Some((staging, target)),
        };
        if let Some(metadata) = existing {
            file.set_permissions(metadata.permissions())
                .map_err(failed)?;
        }
        Ok((output, BufWriter::new(file)))
    }

    /// A failure to write this output, naming it.
    fn failed(&self, error: impl std::fmt::Display) -> Failure {
        write_failure(&self.path, error)
    }

    /// Puts every staged file in place of its output's, under the staging files' lock: an
    /// interrupt meanwhile waits until all are (a trace's two files are replaced both or
    /// neither).
    fn commit_all(outputs: Vec<Output>) -> Result<(), Failure> {
        // Declared before the lock, so that on an error the outputs left are dropped
        // (their staging files removed) once it is released.
        let mut outputs = outputs.into_iter();
        let mut staging_files = staging_files();
        for mut output in outputs.by_ref() {
            // Taken, so that dropping the output does not take the lock again.
            if let Some((staging, target)) = output.staged.take() {
                staging_files.retain(|path| *path != staging);
                if let Err(e) = std::fs::rename(&staging, target) {
                    let _ = std::fs::remove_file(&staging);
                    return Err(output.failed(e));
                }
            }
        }
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some((staging, _)) = &self.staged {
            let mut staging_files = staging_files();
            staging_files.retain(|path| path != staging);
            // Best effort: the run has already failed, with its own error.
            let _ = std::fs::remove_file(staging);
        }
    }
}

/// The staging files of the outputs neither committed nor dropped yet, locked. Each is
/// created, renamed and removed under this lock, so that an interrupt's clean-up
/// ([`end_on_interrupt`]) never races one.
fn staging_files() -> MutexGuard<'static, Vec<PathBuf>> {
    static STAGING_FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    STAGING_FILES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends the process on SIGINT or SIGTERM as those signals would, but removes the outputs'
/// staging files first: a replay stopped with Ctrl-C leaves every output as it was, with
/// no hidden half-written file beside it.
fn end_on_interrupt() {
    let caught = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|runtime| Ok((StopSignals::register(&runtime)?, runtime)));
    let (signals, runtime) = match caught {
        Ok(caught) => caught,
        // Without them a signal still ends the run, only leaving its staging files.
        Err(e) => {
            tracing::warn!("an interrupt will leave the outputs' staging files: {e}");
            return;
        }
    };
    std::thread::spawn(move || {
        let status = runtime.block_on(signals.recv());
        let staging_files = staging_files();
        for path in staging_files.iter() {
            let _ = std::fs::remove_file(path);
        }
        std::process::exit(status.into());
    });
}
