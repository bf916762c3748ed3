//! Reading and writing the neutral CSV trace format (`nodes.csv` and `jobs.csv`, described
//! in the shared traces' `README.md`): trace rows to model types ([`ClusterSpec`], [`Job`]) and back.
//!
//! This module owns the format: which columns exist, how each value is spelled and what it
//! means in the model, and the errors that say which file, line and field were wrong. It
//! builds clusters only through [`ClusterSpecBuilder`] and knows nothing of scheduling,
//! metrics or the event loop. Readers never panic on their input; writers produce files the
//! readers read back to an equal cluster and workload.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use crate::config::{is_priority_number, without_zero_fraction};
use crate::model::{
    BYTES_PER_MIB, ClusterSpec, ClusterSpecBuilder, GpuRequest, Job, JobId, JobKind, LeafPath,
    MAX_GPUS_PER_NODE, NodeRow, PodRequest, PoolId, TenantId, TopologyNeed,
};
use crate::model::{LinkMatrix, LinkProfile, thousandths};

/// A bad trace: the message names the file, the 1-based line and the field.
///
/// `line` is 0 for file-level errors such as "cannot open" or a missing header column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct TraceError {
    pub file: String,
    pub line: u64,
    pub message: String,
}

impl TraceError {
    /// A field's text may hold a line break (a quoted CSV field): the message is kept on
    /// one line.
    fn new(file: &str, line: u64, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line,
            message: message.into().replace('\n', "\\n").replace('\r', "\\r"),
        }
    }
}

/// How trace values map to the model.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Link layout of a node by GPU model; models not listed use `default_links`.
    pub links_by_model: HashMap<String, LinkProfile>,
    pub default_links: LinkProfile,
    /// Exact link matrices by GPU model (parsed `nvidia-smi topo -m` output); they take
    /// precedence over `links_by_model`.
    pub topologies: HashMap<String, Arc<LinkMatrix>>,
    /// Priority class names (e.g. LS, BE) to integers; an integer priority is taken as is;
    /// empty is 0.
    pub priority_classes: HashMap<String, i32>,
    /// The most pods the trace's jobs may have in all ([`MAX_TRACE_PODS`] by default).
    pub max_pods: u64,
    /// The most jobs it may have ([`MAX_TRACE_JOBS`] by default).
    pub max_jobs: u64,
}

impl Default for TraceOptions {
    /// No per-model links (every node an NVSwitch board, [`LinkProfile::NvlinkAll`]) and no
    /// priority classes.
    fn default() -> Self {
        Self {
            links_by_model: HashMap::new(),
            default_links: LinkProfile::NvlinkAll,
            topologies: HashMap::new(),
            priority_classes: HashMap::new(),
            max_pods: MAX_TRACE_PODS,
            max_jobs: MAX_TRACE_JOBS,
        }
    }
}

impl TraceOptions {
    /// The link layout of nodes of `model` (`None`: a CPU-only node).
    pub fn links_for(&self, model: Option<&str>) -> LinkProfile {
        model
            .and_then(|m| self.links_by_model.get(m))
            .copied()
            .unwrap_or(self.default_links)
    }
}

/// The jobs of a trace with their tenants.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// Sorted by submission time (stable: file order breaks ties); `jobs[i].id == JobId(i)`.
    pub jobs: Vec<Job>,
    /// Tenant names; `TenantId(i)` is `tenants[i]`. Index 0 is always the default tenant
    /// "default" (used for an empty tenant column).
    pub tenants: Vec<String>,
    /// Rows skipped because their duration is empty (the job never ran in the original
    /// trace), in file order, as jobs without a duration: never replayed, but written back
    /// with the workload. `skipped[i].id == JobId(jobs.len() + i)`.
    pub skipped: Vec<Job>,
}

/// The default tenant, `TenantId(0)`, is written as an empty tenant column.
use crate::queue::DEFAULT_TENANT;

/// The latest instant a trace may name, in milliseconds (10^12 s, about 31,700 years): a
/// row submitted or ending later is rejected, so that the replay's clock has room to add
/// to its times without overflowing.
pub const MAX_TIME_MS: u64 = 1_000_000_000_000_000;

/// The most pods one job may have: a larger count is taken for a broken row, not a job.
pub const MAX_PODS_PER_JOB: u64 = 100_000;

/// The most pods a trace's jobs may have in all (a pod's request takes about 64 bytes, so
/// about 1 GB of them): a few rows of huge jobs are refused before they exhaust memory.
pub const MAX_TRACE_PODS: u64 = 16_000_000;

/// The most jobs a trace, or a fill's arrivals, may have: a job waiting or running takes
/// about 0.8 to 0.9 KB with what the replay keeps of it (1,000,000 one-GPU jobs queued on
/// 16 GPUs peak at 786 MB, a fill of 4,000,000 arrivals at 3.7 GB), so about 4 GB of them.
pub const MAX_TRACE_JOBS: u64 = 4_000_000;

const NODE_COLUMNS: [&str; 5] = ["node_id", "gpu_model", "gpus", "cpu_milli", "memory_mib"];
const TOPOLOGY_COLUMNS: [&str; 4] = ["leaf", "spine", "superspine", "hbd"];
/// An optional jobs.csv column beyond the neutral format: `required:TIER` or
/// `preferred:TIER` (TIER: hbd, leaf, spine, superspine), empty for no need.
const JOB_TOPOLOGY_COLUMN: &str = "topology";
const JOB_COLUMNS: [&str; 9] = [
    "job_id",
    "tenant",
    "submit_s",
    "duration_s",
    "gpus_per_pod",
    "pods",
    "gpu_model",
    "priority",
    "kind",
];

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// Reads a `nodes.csv` into a cluster; links come from `options` by GPU model.
pub fn read_nodes(path: &Path, options: &TraceOptions) -> Result<ClusterSpec, TraceError> {
    let name = path.display().to_string();
    let file = open(&name, path)?;
    parse_nodes(&name, file, options)
}

/// Reads a `jobs.csv` against `cluster` (GPU model names resolve to its pools).
pub fn read_jobs(
    path: &Path,
    cluster: &ClusterSpec,
    options: &TraceOptions,
) -> Result<Workload, TraceError> {
    let name = path.display().to_string();
    let file = open(&name, path)?;
    parse_jobs(&name, file, cluster, options)
}

fn open(name: &str, path: &Path) -> Result<File, TraceError> {
    File::open(path).map_err(|e| TraceError::new(name, 0, format!("cannot open: {e}")))
}

/// Parses nodes from any reader; `name` is the file name errors carry.
pub fn parse_nodes(
    name: &str,
    reader: impl Read,
    options: &TraceOptions,
) -> Result<ClusterSpec, TraceError> {
    let source = Source::read(name, reader)?;
    let mut csv = source.csv();
    let header = Header::read(&source, &mut csv)?;
    let [node_id, gpu_model, gpus, cpu_milli, memory_mib] = header.require(&NODE_COLUMNS)?;
    let [leaf, spine, superspine, hbd] = header.optional(&TOPOLOGY_COLUMNS)?;
    header.warn_unknown(&[NODE_COLUMNS.as_slice(), &TOPOLOGY_COLUMNS].concat());

    let mut builder = ClusterSpecBuilder::new();
    let mut first_line: HashMap<String, u64> = HashMap::new();
    // Nodes naming a GPU model but no GPU, read as CPU-only: how many, and the first.
    let mut modelled_without_gpus: Option<(u64, u64, String)> = None;
    let mut record = csv::StringRecord::new();
    while source.read_record(&mut csv, &mut record, &header)? {
        let row = Row::new(&source, &record);
        let node_name = row.text(Some(node_id));
        if node_name.is_empty() {
            return Err(row.error("node_id", "empty (every node needs a name)"));
        }
        if let Some(first) = first_line.get(node_name) {
            return Err(row.error(
                "node_id",
                format!("duplicate node \"{node_name}\" (first on line {first})"),
            ));
        }
        first_line.insert(node_name.to_owned(), row.line);

        let mut model = non_empty(row.text(Some(gpu_model)));
        if let Some(model) = model.filter(|m| m.contains('|')) {
            return Err(row.error(
                "gpu_model",
                format!("\"{model}\" contains '|', which separates a job's GPU models"),
            ));
        }
        let gpu_count = row.whole("gpus", Some(gpus))?;
        let gpu_count = match usize::try_from(gpu_count) {
            Ok(n) if n <= MAX_GPUS_PER_NODE => n,
            _ => {
                return Err(row.error(
                    "gpus",
                    format!("{gpu_count} GPUs, more than the {MAX_GPUS_PER_NODE} a node may have"),
                ));
            }
        };
        match (model, gpu_count) {
            (None, n) if n > 0 => {
                return Err(row.error(
                    "gpu_model",
                    format!("empty, but the node has {n} GPUs (a GPU node needs its model)"),
                ));
            }
            (Some(m), 0) => {
                let first = modelled_without_gpus.get_or_insert((0, row.line, m.to_owned()));
                first.0 += 1;
                model = None;
            }
            _ => {}
        }
        let leaf_path = match non_empty(row.text(leaf)) {
            Some(leaf) => Some(LeafPath {
                superspine: row.text(superspine).to_owned(),
                spine: row.text(spine).to_owned(),
                leaf: leaf.to_owned(),
            }),
            None => {
                let above = [("spine", spine), ("superspine", superspine)]
                    .into_iter()
                    .find_map(|(tier, column)| non_empty(row.text(column)).map(|n| (tier, n)));
                if let Some((tier, switch)) = above {
                    return Err(row.error(
                        "leaf",
                        format!(
                            "empty, but {tier} is \"{switch}\" (a node under a {tier} needs its \
                             leaf; leave leaf, spine and superspine empty for a node in no group)"
                        ),
                    ));
                }
                None
            }
        };
        let node = NodeRow {
            name: node_name.to_owned(),
            gpu_model: model.map(str::to_owned),
            gpus: gpu_count,
            cpu_milli: row.optional_whole("cpu_milli", Some(cpu_milli))?,
            memory_bytes: row.optional_mib("memory_mib", Some(memory_mib))?,
            leaf: leaf_path,
            hbd: non_empty(row.text(hbd)).map(str::to_owned),
            ..Default::default()
        };
        let added = match model.and_then(|m| Some((m, options.topologies.get(m)?))) {
            Some((model, matrix)) => builder.add_with_links(node, matrix.clone()).map_err(|e| {
                format!("{e} (the link matrix of links.topologies.{model} in the configuration)")
            }),
            None => (builder.add(node, options.links_for(model))).map_err(|e| e.to_string()),
        };
        added.map_err(|e| source.error(row.line, e))?;
    }
    if first_line.is_empty() {
        // Every job would be refused for its GPU model, or never placed.
        return Err(TraceError::new(
            name,
            0,
            "no nodes, only the header: a replay needs a cluster",
        ));
    }
    if let Some((count, line, model)) = modelled_without_gpus {
        tracing::warn!(
            "{name}: {count} node(s) name a GPU model but have 0 GPUs (the first on line \
             {line}, \"{model}\"): read as CPU-only nodes"
        );
    }
    Ok(builder.build())
}

/// Parses jobs from any reader against `cluster`; `name` is the file name errors carry.
///
/// Every row is checked in full, skipped rows (empty duration) included.
pub fn parse_jobs(
    name: &str,
    reader: impl Read,
    cluster: &ClusterSpec,
    options: &TraceOptions,
) -> Result<Workload, TraceError> {
    let source = Source::read(name, reader)?;
    let mut csv = source.csv();
    let header = Header::read(&source, &mut csv)?;
    let [
        job_id,
        tenant,
        submit_s,
        duration_s,
        gpus_per_pod,
        pods,
        gpu_model,
        priority,
        kind,
    ] = header.require(&JOB_COLUMNS)?;
    let [topology] = header.optional(&[JOB_TOPOLOGY_COLUMN])?;
    header.warn_unknown(&[JOB_COLUMNS.as_slice(), &[JOB_TOPOLOGY_COLUMN]].concat());

    let mut jobs = Vec::new();
    let mut tenants = vec![DEFAULT_TENANT.to_owned()];
    let mut tenant_ids: HashMap<String, TenantId> =
        HashMap::from([(DEFAULT_TENANT.to_owned(), TenantId(0))]);
    let mut first_line: HashMap<String, u64> = HashMap::new();
    let mut skipped = Vec::new();
    let mut trace_pods = 0u64;
    // Models `A|B` names that no node has, beside one some node has: how many rows, and the
    // first.
    let mut unknown_alternatives: Option<(u64, u64, String)> = None;
    let mut record = csv::StringRecord::new();
    while source.read_record(&mut csv, &mut record, &header)? {
        let row = Row::new(&source, &record);
        let job_name = row.text(Some(job_id));
        if job_name.is_empty() {
            return Err(row.error("job_id", "empty (every job needs a name)"));
        }
        if let Some(first) = first_line.get(job_name) {
            return Err(row.error(
                "job_id",
                format!("duplicate job \"{job_name}\" (first on line {first})"),
            ));
        }
        first_line.insert(job_name.to_owned(), row.line);

        let submit_ms = row.seconds_as_ms("submit_s", row.text(Some(submit_s)))?;
        let duration_text = row.text(Some(duration_s));
        let duration_ms = match duration_text {
            "" => None,
            text => Some(row.seconds_as_ms("duration_s", text)?),
        };
        // Both are at most MAX_TIME_MS: their sum fits.
        let end_ms = submit_ms + duration_ms.unwrap_or(0);
        if end_ms > MAX_TIME_MS {
            return Err(row.error(
                "duration_s",
                format!(
                    "the job would end at {} s, past the clock's last second, {}",
                    format_seconds(end_ms),
                    MAX_TIME_MS / 1000
                ),
            ));
        }
        let gpu = GpuRequest::parse(row.text(Some(gpus_per_pod)))
            .map_err(|message| row.error("gpus_per_pod", message))?;
        let pod_count = row.whole("pods", Some(pods))?;
        if pod_count == 0 || pod_count > MAX_PODS_PER_JOB {
            return Err(row.error(
                "pods",
                format!("{pod_count} pods: a job has from 1 to {MAX_PODS_PER_JOB}"),
            ));
        }
        if (jobs.len() + skipped.len()) as u64 >= options.max_jobs {
            return Err(row.error(
                "job_id",
                format!("the trace has more than {} jobs", options.max_jobs),
            ));
        }
        trace_pods += pod_count;
        if trace_pods > options.max_pods {
            return Err(row.error(
                "pods",
                format!(
                    "with this job the trace has more than {} pods in all",
                    options.max_pods
                ),
            ));
        }
        let (pools, unknown) = row.pools(row.text(Some(gpu_model)), cluster)?;
        if let Some(model) = unknown {
            let first = unknown_alternatives.get_or_insert((0, row.line, model));
            first.0 += 1;
        }
        let priority = row.priority(row.text(Some(priority)), &options.priority_classes)?;
        let kind_text = row.text(Some(kind));
        let kind = JobKind::parse(kind_text).ok_or_else(|| {
            row.error(
                "kind",
                format!("unknown kind \"{kind_text}\" (known: train, inference, dev, unknown)"),
            )
        })?;

        let topology = TopologyNeed::parse(row.text(topology))
            .map_err(|message| row.error(JOB_TOPOLOGY_COLUMN, message))?;

        let tenant = match row.text(Some(tenant)) {
            "" => TenantId(0),
            tenant_name => match tenant_ids.get(tenant_name) {
                Some(&id) => id,
                None => {
                    let id = u16::try_from(tenants.len()).map(TenantId).map_err(|_| {
                        row.error("tenant", format!("more than {} tenants", u16::MAX))
                    })?;
                    tenants.push(tenant_name.to_owned());
                    tenant_ids.insert(tenant_name.to_owned(), id);
                    id
                }
            },
        };
        if u32::try_from(jobs.len() + skipped.len()).is_err() {
            return Err(row.error("job_id", format!("more than {} jobs", u32::MAX)));
        }
        let job = Job {
            id: JobId(0),
            name: job_name.to_owned(),
            tenant,
            priority,
            kind,
            pools,
            // Bounded by MAX_PODS_PER_JOB above.
            pods: vec![PodRequest::gpus(gpu); pod_count as usize],
            submit_ms,
            duration_ms,
            topology,
            constraints: Vec::new(),
            pod_rules: None,
            may_preempt: true,
        };
        match duration_ms {
            Some(_) => jobs.push(job),
            None => skipped.push(job),
        }
    }
    if jobs.is_empty() && skipped.is_empty() {
        return Err(TraceError::new(
            name,
            0,
            "no jobs, only the header: nothing to replay",
        ));
    }
    if let Some((count, line, model)) = unknown_alternatives {
        tracing::warn!(
            "{name}: {count} job(s) accept a GPU model no node has beside one some node has \
             (the first on line {line}, \"{model}\"): they go to the models nodes have"
        );
    }
    jobs.sort_by_key(|job| job.submit_ms);
    for (index, job) in jobs.iter_mut().chain(&mut skipped).enumerate() {
        // Fits: checked for every row above.
        job.id = JobId(index as u32);
    }
    Ok(Workload {
        jobs,
        tenants,
        skipped,
    })
}

/// A trace file, read whole, and the lines its records start on.
///
/// The CSV reader's own line numbers are wrong after a blank line (rust-csv issue #208),
/// and the byte offset it gives a record is where the blank lines before it begin: lines
/// are counted here, from the text.
struct Source<'a> {
    name: &'a str,
    text: Vec<u8>,
    /// The byte offset of every line but the first. A line ends at `\n`, `\r\n` or a lone
    /// `\r`, as for the CSV reader.
    line_starts: Vec<usize>,
    /// Where the header starts: past the lines of nothing but spaces and tabs (and a
    /// byte-order mark) before it (the CSV reader skips empty lines there, and would read
    /// one of spaces as a header of one empty column). The reader's byte positions count
    /// from here.
    start: usize,
}

impl<'a> Source<'a> {
    fn read(name: &'a str, mut reader: impl Read) -> Result<Self, TraceError> {
        let mut text = Vec::new();
        reader
            .read_to_end(&mut text)
            .map_err(|e| TraceError::new(name, 0, format!("cannot read: {e}")))?;
        let line_starts = (0..text.len())
            .filter(|&i| match text[i] {
                b'\n' => true,
                b'\r' => text.get(i + 1) != Some(&b'\n'),
                _ => false,
            })
            .map(|i| i + 1)
            .collect::<Vec<usize>>();
        let starts = std::iter::once(0).chain(line_starts.iter().copied());
        let ends = line_starts
            .iter()
            .copied()
            .chain(std::iter::once(text.len()));
        // A UTF-8 byte-order mark is no text either: before a line of spaces, the reader
        // would read that line as the header.
        let bom = if text.starts_with(b"\xef\xbb\xbf") {
            3
        } else {
            0
        };
        let start = (starts.zip(ends))
            .find(|&(from, to)| {
                !text[from.max(bom)..to]
                    .iter()
                    .all(|b| b" \t\r\n".contains(b))
            })
            .map_or(text.len(), |(from, _)| from);
        Ok(Self {
            name,
            text,
            line_starts,
            start,
        })
    }

    fn csv(&self) -> csv::Reader<&[u8]> {
        csv::ReaderBuilder::new()
            .has_headers(true)
            .trim(csv::Trim::All)
            .from_reader(&self.text[self.start..])
    }

    /// The 1-based line the header is on.
    fn header_line(&self) -> u64 {
        self.line_of_byte(self.start)
    }

    /// Reads the next record into `record`; `false` at the end of the file. A line of
    /// nothing but spaces and tabs is skipped, as the reader skips an empty one, and so is a
    /// row of empty fields alone (`,,,,`, as a spreadsheet writes past its last row).
    /// `header`: the columns' names.
    fn read_record(
        &self,
        csv: &mut csv::Reader<&[u8]>,
        record: &mut csv::StringRecord,
        header: &Header,
    ) -> Result<bool, TraceError> {
        loop {
            match csv.read_record(record) {
                Err(e) if self.is_blank_line(&e) => continue,
                Ok(true) => {
                    self.closed_quotes(csv, record, header)?;
                    if record.iter().all(str::is_empty) {
                        continue;
                    }
                    return Ok(true);
                }
                read => return read.map_err(|e| self.record_error(csv, &e)),
            }
        }
    }

    /// Refuses a record with a quote left open, which the reader takes in silence: no field
    /// of a trace holds a line break, so a quoted field that runs on over the lines after
    /// it (rows that would be lost in it where it is the last) or to the end of the file
    /// is named on its row's line.
    fn closed_quotes(
        &self,
        csv: &csv::Reader<&[u8]>,
        record: &csv::StringRecord,
        header: &Header,
    ) -> Result<(), TraceError> {
        let Some(position) = record.position() else {
            return Ok(());
        };
        let (from, to) = (self.record_start(position), self.position_byte(csv));
        match self.open_quote(from, to) {
            Some((column, runs_on)) => Err(self.error(
                self.line(Some(position)),
                format!("field {}: {runs_on}", header.name(column)),
            )),
            None => Ok(()),
        }
    }

    /// Where the record whose text is `from..to` (its line break included) has a quoted
    /// field holding a line break, or never closed: the field's column, and where it runs
    /// on to. Read as the CSV reader reads quotes: one opens a field only as its first
    /// byte (elsewhere it is text), and inside, `""` is a quote.
    fn open_quote(&self, from: usize, to: usize) -> Option<(usize, String)> {
        let mut bytes = self.text[from..to].iter().peekable();
        let (mut column, mut quoted, mut field_start) = (0, false, true);
        let mut open = None;
        while let Some(&b) = bytes.next() {
            match (quoted, b) {
                (true, b'"') if bytes.peek() == Some(&&b'"') => {
                    bytes.next();
                }
                (true, b'"') => quoted = false,
                (true, b'\n' | b'\r') => open = open.or(Some(column)),
                (true, _) => {}
                (false, b'"') if field_start => quoted = true,
                (false, b',') => column += 1,
                (false, _) => {}
            }
            field_start = !quoted && b == b',';
        }
        let column = open.or(quoted.then_some(column))?;
        let end = self.text[from..to].trim_ascii_end().len() + from;
        let last_line = self.line_of_byte(end.saturating_sub(1));
        let at_end = if to >= self.text.len() {
            ", the end of the file"
        } else {
            ""
        };
        Some((
            column,
            format!(
                "a quoted field runs on to line {last_line}{at_end}: is a closing quote missing?"
            ),
        ))
    }

    /// The byte the reader has read to.
    fn position_byte(&self, csv: &csv::Reader<&[u8]>) -> usize {
        usize::try_from(csv.position().byte()).map_or(self.text.len(), |b| {
            b.saturating_add(self.start).min(self.text.len())
        })
    }

    /// Whether a short row is a line of spaces and tabs alone.
    fn is_blank_line(&self, err: &csv::Error) -> bool {
        let csv::ErrorKind::UnequalLengths {
            pos: Some(pos),
            len: 1,
            ..
        } = err.kind()
        else {
            return false;
        };
        (self.text[self.record_start(pos)..].iter())
            .take_while(|&&b| b != b'\n' && b != b'\r')
            .all(|&b| b == b' ' || b == b'\t')
    }

    fn record_error(&self, csv: &csv::Reader<&[u8]>, e: &csv::Error) -> TraceError {
        let mut error = self.csv_error(e);
        // A quote left open runs its row on over the lines after it, or to the end of the
        // file, which then read as one field: the row's own line looks right.
        if let csv::ErrorKind::UnequalLengths { pos: Some(pos), .. } = e.kind()
            && let Some((_, runs_on)) =
                self.open_quote(self.record_start(pos), self.position_byte(csv))
        {
            error.message.push_str(&format!(" ({runs_on})"));
        }
        error
    }

    /// The byte a record starts at, from its position: past the blank lines at its byte
    /// offset.
    fn record_start(&self, position: &csv::Position) -> usize {
        let offset = usize::try_from(position.byte())
            .map_or(self.text.len(), |b| (self.start + b).min(self.text.len()));
        let blank = self.text[offset..]
            .iter()
            .take_while(|&&b| b == b'\n' || b == b'\r')
            .count();
        offset + blank
    }

    /// The 1-based line a record starts on, from its position (0 without one).
    fn line(&self, position: Option<&csv::Position>) -> u64 {
        position.map_or(0, |p| self.line_of_byte(self.record_start(p)))
    }

    /// The 1-based line the byte at `offset` is on (a line break is on the line it ends).
    fn line_of_byte(&self, offset: usize) -> u64 {
        self.line_starts.partition_point(|&s| s <= offset) as u64 + 1
    }

    fn error(&self, line: u64, message: impl Into<String>) -> TraceError {
        TraceError::new(self.name, line, message)
    }

    fn csv_error(&self, err: &csv::Error) -> TraceError {
        let message = match err.kind() {
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => format!(
                "the row has {len} field{}, the header has {expected_len}",
                if *len == 1 { "" } else { "s" }
            ),
            csv::ErrorKind::Utf8 { err, .. } => {
                format!("field number {} is not valid UTF-8", err.field() + 1)
            }
            _ => err.to_string(),
        };
        self.error(self.line(err.position()), message)
    }
}

fn non_empty(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

/// The header row: the position of each column by name, matched ignoring ASCII case.
struct Header<'a> {
    source: &'a Source<'a>,
    /// The line the header is on.
    line: u64,
    names: Vec<String>,
}

impl<'a> Header<'a> {
    fn read(source: &'a Source<'a>, csv: &mut csv::Reader<&[u8]>) -> Result<Self, TraceError> {
        let record = csv.headers().map_err(|e| source.csv_error(&e))?.clone();
        let line = source.header_line();
        let end = source.position_byte(csv);
        if let Some((column, runs_on)) = source.open_quote(source.start, end) {
            let message = format!("the header's column {}: {runs_on}", column + 1);
            return Err(source.error(line, message));
        }
        let names = record
            .iter()
            .enumerate()
            // A UTF-8 byte-order mark may lead the first column name.
            .map(|(i, h)| {
                if i == 0 {
                    h.trim_start_matches('\u{feff}')
                } else {
                    h
                }
            })
            .map(str::to_owned)
            .collect();
        Ok(Self {
            source,
            line,
            names,
        })
    }

    /// The name of column `column`, as the file spells it.
    fn name(&self, column: usize) -> &str {
        // A record has as many fields as the header: the reader refuses any other.
        &self.names[column]
    }

    fn find(&self, column: &str) -> Result<Option<usize>, TraceError> {
        let mut found = self
            .names
            .iter()
            .enumerate()
            .filter(|(_, n)| n.eq_ignore_ascii_case(column));
        let first = found.next().map(|(i, _)| i);
        if found.next().is_some() {
            return Err(self.source.error(
                self.line,
                format!("column {column} appears more than once in the header"),
            ));
        }
        Ok(first)
    }

    /// Warns, on stderr, of the columns that are none of `known`: they are ignored.
    fn warn_unknown(&self, known: &[&str]) {
        let unknown: Vec<&str> = self
            .names
            .iter()
            .map(|name| match name.as_str() {
                "" => "(one without a name: a trailing comma?)",
                name => name,
            })
            .filter(|name| !known.iter().any(|k| k.eq_ignore_ascii_case(name)))
            .collect();
        if !unknown.is_empty() {
            tracing::warn!(
                "{}: ignoring the column(s) {} (the format's columns: {})",
                self.source.name,
                unknown.join(", "),
                known.join(", ")
            );
        }
    }

    fn require<const N: usize>(&self, columns: &[&str; N]) -> Result<[usize; N], TraceError> {
        let mut positions = [0; N];
        for (slot, column) in positions.iter_mut().zip(columns) {
            *slot = self.find(column)?.ok_or_else(|| {
                if self.names.is_empty() {
                    return self.source.error(
                        0,
                        format!(
                            "the file is empty: no header (required: {})",
                            columns.join(",")
                        ),
                    );
                }
                self.source.error(
                    self.line,
                    format!(
                        "missing column {column} (the header has {}; required: {})",
                        self.names.join(","),
                        columns.join(",")
                    ),
                )
            })?;
        }
        Ok(positions)
    }

    fn optional<const N: usize>(
        &self,
        columns: &[&str; N],
    ) -> Result<[Option<usize>; N], TraceError> {
        let mut positions = [None; N];
        for (slot, column) in positions.iter_mut().zip(columns) {
            *slot = self.find(column)?;
        }
        Ok(positions)
    }
}

/// One data row and the field parsers that name the row in their errors.
struct Row<'a> {
    source: &'a Source<'a>,
    line: u64,
    record: &'a csv::StringRecord,
}

impl<'a> Row<'a> {
    fn new(source: &'a Source<'a>, record: &'a csv::StringRecord) -> Self {
        let line = source.line(record.position());
        Self {
            source,
            line,
            record,
        }
    }

    fn error(&self, field: &str, message: impl std::fmt::Display) -> TraceError {
        self.source
            .error(self.line, format!("field {field}: {message}"))
    }

    /// The (trimmed) text of a column; empty for a column the file does not have.
    fn text(&self, column: Option<usize>) -> &'a str {
        column.and_then(|c| self.record.get(c)).unwrap_or("")
    }

    fn whole(&self, field: &str, column: Option<usize>) -> Result<u64, TraceError> {
        let text = self.text(column);
        parse_whole(text).map_err(|m| self.error(field, m))
    }

    fn optional_whole(
        &self,
        field: &str,
        column: Option<usize>,
    ) -> Result<Option<u64>, TraceError> {
        match self.text(column) {
            "" => Ok(None),
            _ => self.whole(field, column).map(Some),
        }
    }

    /// An optional whole number of MiB, in bytes.
    fn optional_mib(&self, field: &str, column: Option<usize>) -> Result<Option<u64>, TraceError> {
        let Some(mib) = self.optional_whole(field, column)? else {
            return Ok(None);
        };
        mib.checked_mul(BYTES_PER_MIB)
            .map(Some)
            .ok_or_else(|| self.error(field, format!("{mib} MiB is too large")))
    }

    fn seconds_as_ms(&self, field: &str, text: &str) -> Result<u64, TraceError> {
        parse_seconds_as_ms(text).map_err(|m| self.error(field, m))
    }

    /// `A|B` to the pools of those models that some node has, with the first model no node
    /// has when another is (the job goes to the others); empty is any pool. A job none of
    /// whose models a node has is an error.
    fn pools(
        &self,
        text: &str,
        cluster: &ClusterSpec,
    ) -> Result<(Vec<PoolId>, Option<String>), TraceError> {
        let mut pools = Vec::new();
        let mut unknown = None;
        if text.is_empty() {
            return Ok((pools, unknown));
        }
        for model in text.split('|').map(str::trim) {
            if model.is_empty() {
                return Err(self.error(
                    "gpu_model",
                    format!("\"{text}\" has an empty model name between `|`"),
                ));
            }
            match cluster.pool_of_model(Some(model)) {
                Some(pool) if !pools.contains(&pool) => pools.push(pool),
                Some(_) => {}
                None => {
                    unknown.get_or_insert_with(|| model.to_owned());
                }
            }
        }
        match (&unknown, pools.is_empty()) {
            (Some(model), true) => {
                let known: Vec<&str> = cluster.gpu_models().collect();
                Err(self.error(
                    "gpu_model",
                    format!(
                        "unknown GPU model \"{model}\" (the cluster has: {})",
                        if known.is_empty() {
                            "no GPU models".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                ))
            }
            _ => Ok((pools, unknown)),
        }
    }

    fn priority(&self, text: &str, classes: &HashMap<String, i32>) -> Result<i32, TraceError> {
        if text.is_empty() {
            return Ok(0);
        }
        let number = without_zero_fraction(text);
        if is_priority_number(number) {
            return number.parse().map_err(|_| {
                self.error(
                    "priority",
                    format!("\"{text}\" is out of range for a priority"),
                )
            });
        }
        classes.get(text).copied().ok_or_else(|| {
            let mut known: Vec<&str> = classes.keys().map(String::as_str).collect();
            known.sort_unstable();
            let known = if known.is_empty() {
                "none are configured".to_owned()
            } else {
                format!("known: {}", known.join(", "))
            };
            self.error(
                "priority",
                format!("unknown priority class \"{text}\" ({known}; or give an integer)"),
            )
        })
    }
}

fn parse_whole(text: &str) -> Result<u64, String> {
    let text = without_zero_fraction(text);
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let zero = |t: &str| t.bytes().all(|b| b == b'0');
    if text
        .strip_prefix('-')
        .is_some_and(|t| digits(t) && !zero(t))
    {
        return Err(format!("\"{text}\" is negative"));
    }
    if !digits(text) {
        return Err(format!("\"{text}\" is not a whole number"));
    }
    text.parse()
        .map_err(|_| format!("\"{text}\" is too large a number"))
}

/// Seconds, whole or decimal, to milliseconds without float rounding, at most
/// [`MAX_TIME_MS`]. Digits past the third decimal place round to the nearest millisecond
/// (half up).
fn parse_seconds_as_ms(text: &str) -> Result<u64, String> {
    if text.starts_with('-') {
        return Err(format!("\"{text}\" is negative"));
    }
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(format!(
            "\"{text}\" is not a number of seconds (whole or decimal, as 90 or 1.5)"
        ));
    }
    let too_large = || {
        format!(
            "\"{text}\" is more seconds than the clock holds ({})",
            MAX_TIME_MS / 1000
        )
    };
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let mut millis = 0u64;
    for (place, digit) in fraction.bytes().take(3).enumerate() {
        millis += u64::from(digit - b'0') * [100, 10, 1][place];
    }
    if fraction.as_bytes().get(3).is_some_and(|&d| d >= b'5') {
        millis += 1;
    }
    whole
        .checked_mul(1000)
        .and_then(|ms| ms.checked_add(millis))
        .filter(|&ms| ms <= MAX_TIME_MS)
        .ok_or_else(too_large)
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// Writes `cluster` as a `nodes.csv`, topology columns included.
pub fn write_nodes_to(writer: impl Write, cluster: &ClusterSpec) -> io::Result<()> {
    let mut csv = csv::Writer::from_writer(writer);
    let header: Vec<&str> = NODE_COLUMNS
        .iter()
        .chain(&TOPOLOGY_COLUMNS)
        .copied()
        .collect();
    csv.write_record(&header)?;
    for node in &cluster.nodes {
        let leaf = match node.topology.leaf {
            Some(id) => Some(cluster.leaves.get(id.index()).ok_or_else(|| {
                invalid(format!(
                    "node {}: leaf {} is not in the cluster",
                    node.name, id.0
                ))
            })?),
            None => None,
        };
        let hbd = match node.topology.hbd {
            Some(id) => cluster
                .hbds
                .get(id as usize)
                .map(String::as_str)
                .ok_or_else(|| {
                    invalid(format!(
                        "node {}: HBD {id} is not in the cluster",
                        node.name
                    ))
                })?,
            None => "",
        };
        let optional = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        csv.write_record([
            node.name.as_str(),
            node.gpu_model.as_deref().unwrap_or(""),
            &node.gpus().to_string(),
            &optional(node.cpu_milli),
            &optional(node.memory_bytes.map(|bytes| bytes / BYTES_PER_MIB)),
            leaf.map_or("", |l| l.leaf.as_str()),
            leaf.map_or("", |l| l.spine.as_str()),
            leaf.map_or("", |l| l.superspine.as_str()),
            hbd,
        ])?;
    }
    csv.flush()
}

/// Writes `workload` as a `jobs.csv`, its skipped rows last with an empty `duration_s`;
/// pools are written as the GPU model names of `cluster`. A job whose pods differ, that
/// has no pod, or that accepts the CPU-only pool by name cannot be written in the format:
/// an `InvalidData` error. Pod CPU and memory are not written (the format has none).
pub fn write_jobs_to(
    writer: impl Write,
    workload: &Workload,
    cluster: &ClusterSpec,
) -> io::Result<()> {
    let mut csv = csv::Writer::from_writer(writer);
    csv.write_record(JOB_COLUMNS.iter().chain(&[JOB_TOPOLOGY_COLUMN]))?;
    for job in workload.jobs.iter().chain(&workload.skipped) {
        let Some(first) = job.pods.first() else {
            return Err(invalid(format!("job {}: no pods", job.name)));
        };
        if job.pods.iter().any(|p| p.gpu != first.gpu) {
            return Err(invalid(format!(
                "job {}: pods ask for different GPUs; the format has one gpus_per_pod",
                job.name
            )));
        }
        let tenant = match job.tenant {
            TenantId(0) => "",
            id => workload
                .tenants
                .get(id.index())
                .map(String::as_str)
                .ok_or_else(|| invalid(format!("job {}: tenant {} is unknown", job.name, id.0)))?,
        };
        let models = job
            .pools
            .iter()
            .map(|&pool| {
                cluster
                    .pools
                    .get(pool.index())
                    .and_then(|p| p.gpu_model.as_deref())
                    .ok_or_else(|| {
                        invalid(format!(
                            "job {}: pool {} has no GPU model name to write",
                            job.name, pool.0
                        ))
                    })
            })
            .collect::<io::Result<Vec<&str>>>()?;
        csv.write_record([
            job.name.as_str(),
            tenant,
            &format_seconds(job.submit_ms),
            &job.duration_ms.map(format_seconds).unwrap_or_default(),
            &first.gpu.to_string(),
            &job.pods.len().to_string(),
            &models.join("|"),
            &job.priority.to_string(),
            job.kind.name(),
            &job.topology.map(|t| t.to_string()).unwrap_or_default(),
        ])?;
    }
    csv.flush()
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Milliseconds as seconds: whole when whole, else with up to 3 decimal places.
pub(crate) fn format_seconds(ms: u64) -> String {
    thousandths(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufWriter;

    use crate::sim::synthetic::{
        SyntheticOptions, default_cluster, default_links_by_model, generate_workload,
    };

    const NODES_HEADER: &str = "node_id,gpu_model,gpus,cpu_milli,memory_mib\n";
    const JOBS_HEADER: &str =
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n";

    /// A fresh directory under the system temp dir, removed on drop.
    fn temp_dir(tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("kant-trace-{tag}-"))
            .tempdir()
            .expect("create temp dir")
    }

    /// A new file at `path`, buffered, for a writer.
    fn create(path: &Path) -> BufWriter<File> {
        BufWriter::new(File::create(path).expect("create file"))
    }

    fn options() -> TraceOptions {
        TraceOptions {
            links_by_model: default_links_by_model(),
            default_links: LinkProfile::Pcie,
            topologies: HashMap::new(),
            priority_classes: HashMap::from([("LS".to_owned(), 100), ("BE".to_owned(), -10)]),
            ..TraceOptions::default()
        }
    }

    #[test]
    fn a_topology_matrix_applies_to_its_model_and_must_match_the_gpu_count() {
        let matrix = "\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n";
        let mut options = options();
        let parsed = crate::model::parse_topo_matrix("L40S", matrix).expect("matrix");
        options.topologies.insert("L40S".into(), Arc::new(parsed));
        let text = format!("{NODES_HEADER}a,L40S,2,,\n");
        let cluster = parse_nodes("nodes.csv", text.as_bytes(), &options).expect("nodes");
        let links = &cluster.nodes[0].links;
        assert_eq!(links.class(0, 1), crate::model::LinkClass::Pcie);
        let text = format!("{NODES_HEADER}a,L40S,2,,\nb,L40S,4,,\n");
        let err = parse_nodes("nodes.csv", text.as_bytes(), &options).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(
            err.message
                .contains("node b: its link matrix covers 2 GPUs, but its gpus field says 4")
                && err.message.contains("links.topologies.L40S"),
            "{err}"
        );
    }

    fn small_cluster() -> ClusterSpec {
        let text = format!("{NODES_HEADER}a,H100,8,1000,2000\nb,A100,8,,\nc,,0,32000,1024\n");
        parse_nodes("nodes.csv", text.as_bytes(), &options()).expect("small cluster")
    }

    fn jobs(text: &str) -> Result<Workload, TraceError> {
        parse_jobs(
            "jobs.csv",
            format!("{JOBS_HEADER}{text}").as_bytes(),
            &small_cluster(),
            &options(),
        )
    }

    fn nodes(text: &str) -> Result<ClusterSpec, TraceError> {
        parse_nodes(
            "nodes.csv",
            format!("{NODES_HEADER}{text}").as_bytes(),
            &options(),
        )
    }

    fn assert_error(err: TraceError, line: u64, parts: &[&str]) {
        let text = err.to_string();
        assert_eq!(err.line, line, "{text}");
        assert!(
            text.starts_with(&format!("{}:{line}: ", err.file)),
            "{text}"
        );
        for part in parts {
            assert!(text.contains(part), "`{text}` lacks `{part}`");
        }
    }

    fn assert_same_cluster(a: &ClusterSpec, b: &ClusterSpec) {
        assert_eq!(a.nodes.len(), b.nodes.len());
        for (x, y) in a.nodes.iter().zip(&b.nodes) {
            assert_eq!(x.name, y.name);
            assert_eq!(x.gpu_model, y.gpu_model);
            assert_eq!(x.pool, y.pool);
            assert_eq!(x.cpu_milli, y.cpu_milli);
            assert_eq!(x.memory_bytes, y.memory_bytes);
            assert_eq!(*x.links, *y.links, "links of {}", x.name);
            assert_eq!(x.topology, y.topology);
        }
        assert_eq!(a.leaves, b.leaves);
        assert_eq!(a.hbds, b.hbds);
        assert_eq!(a.pools.len(), b.pools.len());
        for (x, y) in a.pools.iter().zip(&b.pools) {
            assert_eq!(x.gpu_model, y.gpu_model);
            assert_eq!(x.nodes, y.nodes);
            assert_eq!(x.groups, y.groups);
            assert_eq!(x.gpus_per_node, y.gpus_per_node);
            assert_eq!(x.largest_leaf_gpus, y.largest_leaf_gpus);
        }
        assert_eq!(a.groups.len(), b.groups.len());
        for (x, y) in a.groups.iter().zip(&b.groups) {
            assert_eq!((x.pool, x.leaf, &x.nodes), (y.pool, y.leaf, &y.nodes));
        }
        assert_eq!(a.node_group, b.node_group);
    }

    #[test]
    fn default_cluster_round_trips_through_a_file() {
        let dir = temp_dir("nodes");
        let path = dir.path().join("nodes.csv");
        let cluster = default_cluster();
        write_nodes_to(create(&path), &cluster).expect("write nodes");
        let back = read_nodes(&path, &options()).expect("read nodes back");
        assert_same_cluster(&cluster, &back);
        assert_eq!(back.total_gpus(), 3072);
        assert_eq!(back.leaves.len(), 16);
    }

    #[test]
    fn generated_workload_round_trips_through_a_file() {
        let dir = temp_dir("jobs");
        let cluster = default_cluster();
        let workload = generate_workload(
            &cluster,
            &SyntheticOptions {
                seed: 7,
                jobs: 500,
                load: 0.9,
            },
        );
        let path = dir.path().join("jobs.csv");
        write_jobs_to(create(&path), &workload, &cluster).expect("write jobs");
        let back = read_jobs(&path, &cluster, &options()).expect("read jobs back");
        assert_eq!(back.skipped.len(), 0);
        assert_eq!(back.jobs.len(), workload.jobs.len());
        for (x, y) in workload.jobs.iter().zip(&back.jobs) {
            assert_eq!(x.id, y.id);
            assert_eq!(x.name, y.name);
            // Tenant ids are interned in order of appearance: compare names.
            assert_eq!(
                workload.tenants[x.tenant.index()],
                back.tenants[y.tenant.index()]
            );
            assert_eq!(x.priority, y.priority);
            assert_eq!(x.kind, y.kind);
            assert_eq!(x.pools, y.pools);
            assert_eq!(x.pods, y.pods);
            assert_eq!(x.submit_ms, y.submit_ms);
            assert_eq!(x.duration_ms, y.duration_ms);
        }
    }

    #[test]
    fn fractional_times_gpus_and_tenants_round_trip() {
        let cluster = small_cluster();
        let text = "j1,,1.5,0.25,0.5,1,H100|A100,LS,inference\n\
                    j2,team-a,0,3600,8,2,H100,-3,train\n\
                    j3,default,1.5,10.0005,0,1,,,\n";
        let workload = jobs(text).expect("parse");
        assert_eq!(workload.tenants, ["default", "team-a"]);
        let names: Vec<&str> = workload.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            names,
            ["j2", "j1", "j3"],
            "sorted by submit, file order breaks ties"
        );
        let j1 = &workload.jobs[1];
        assert_eq!(
            (j1.id, j1.submit_ms, j1.duration_ms),
            (JobId(1), 1500, Some(250))
        );
        assert_eq!(j1.pods, [PodRequest::gpus(GpuRequest::Fraction(500))]);
        assert_eq!(j1.pools.len(), 2);
        assert_eq!((j1.priority, j1.kind), (100, JobKind::Inference));
        let j2 = &workload.jobs[0];
        assert_eq!(
            (j2.tenant, j2.priority, j2.pods.len()),
            (TenantId(1), -3, 2)
        );
        let j3 = &workload.jobs[2];
        assert_eq!(
            (j3.tenant, j3.duration_ms, j3.kind),
            (TenantId(0), Some(10_001), JobKind::Unknown)
        );
        assert!(j3.pods[0].gpu.is_none() && j3.pools.is_empty());

        let mut out = Vec::new();
        write_jobs_to(&mut out, &workload, &cluster).expect("write");
        let written = String::from_utf8(out).expect("utf-8");
        assert!(
            written.contains("j1,,1.5,0.25,0.5,1,H100|A100,100,inference,\n"),
            "{written}"
        );
        assert!(
            written.contains("j3,,1.5,10.001,0,1,,0,unknown,\n"),
            "{written}"
        );
        let back =
            parse_jobs("again.csv", written.as_bytes(), &cluster, &options()).expect("read back");
        assert_eq!(back.tenants, workload.tenants);
        for (x, y) in workload.jobs.iter().zip(&back.jobs) {
            assert_eq!(
                (
                    &x.name,
                    x.tenant,
                    x.priority,
                    &x.pools,
                    &x.pods,
                    x.submit_ms,
                    x.duration_ms
                ),
                (
                    &y.name,
                    y.tenant,
                    y.priority,
                    &y.pools,
                    &y.pods,
                    y.submit_ms,
                    y.duration_ms
                )
            );
        }
    }

    #[test]
    fn empty_durations_are_skipped_counted_and_written_back() {
        let workload = jobs("a,,0,,1,1,,,\nb,,5,60,1,1,,,\nc,t,9,,0.5,1,,BE,\n").expect("parse");
        assert_eq!(workload.skipped.len(), 2);
        assert_eq!(workload.jobs.len(), 1);
        assert_eq!(workload.jobs[0].name, "b");
        let skipped: Vec<(&str, JobId)> = workload
            .skipped
            .iter()
            .map(|j| (j.name.as_str(), j.id))
            .collect();
        assert_eq!(skipped, [("a", JobId(1)), ("c", JobId(2))]);

        let cluster = small_cluster();
        let mut out = Vec::new();
        write_jobs_to(&mut out, &workload, &cluster).expect("write");
        let written = String::from_utf8(out).expect("utf-8");
        assert!(
            written.contains("\nc,t,9,,0.5,1,,-10,unknown,\n"),
            "{written}"
        );
        let back = parse_jobs("again.csv", written.as_bytes(), &cluster, &options()).expect("read");
        assert_eq!(back.skipped.len(), 2);
        assert_eq!(back.tenants, workload.tenants);
        for (x, y) in workload.skipped.iter().zip(&back.skipped) {
            assert_eq!(
                (
                    &x.name,
                    x.tenant,
                    x.priority,
                    &x.pods,
                    x.submit_ms,
                    x.duration_ms
                ),
                (
                    &y.name,
                    y.tenant,
                    y.priority,
                    &y.pods,
                    y.submit_ms,
                    y.duration_ms
                )
            );
        }
    }

    #[test]
    fn topology_column_is_optional_and_round_trips() {
        let cluster = parse_nodes(
            "nodes.csv",
            "node_id,gpu_model,gpus,cpu_milli,memory_mib\nn,H100,8,,\n".as_bytes(),
            &options(),
        )
        .expect("nodes");
        let text = format!(
            "{},topology\na,,0,60,8,4,,,train,required:leaf\nb,,0,60,8,1,,,train,\n",
            JOB_COLUMNS.join(",")
        );
        let workload = parse_jobs("jobs.csv", text.as_bytes(), &cluster, &options()).expect("jobs");
        let need = workload.jobs[0].topology.expect("a need");
        assert_eq!(need.to_string(), "required:leaf");
        assert_eq!(workload.jobs[1].topology, None);
        let mut out = Vec::new();
        write_jobs_to(&mut out, &workload, &cluster).expect("write");
        let written = String::from_utf8(out).expect("utf-8");
        assert!(written.contains(",train,required:leaf\n"), "{written}");
        let bad = text.replace("required:leaf", "required:rack");
        let err = parse_jobs("jobs.csv", bad.as_bytes(), &cluster, &options()).unwrap_err();
        assert_eq!(
            (err.line, err.message.contains("field topology")),
            (2, true),
            "{err}"
        );
    }

    #[test]
    fn non_numeric_fields_are_named() {
        assert_error(
            nodes("a,H100,8,1,1\nb,H100,x,1,1\n").unwrap_err(),
            3,
            &["nodes.csv", "field gpus", "\"x\" is not a whole number"],
        );
        assert_error(
            nodes("a,H100,8,lots,1\n").unwrap_err(),
            2,
            &["field cpu_milli", "\"lots\""],
        );
        // `|` separates a job's GPU models: no pool could be named.
        assert_error(
            nodes("a,A|B,8,1,1\n").unwrap_err(),
            2,
            &["field gpu_model", "\"A|B\" contains '|'"],
        );
        assert_error(
            jobs("a,,0,60,1,1,,,\nb,,soon,60,1,1,,,\n").unwrap_err(),
            3,
            &["jobs.csv", "field submit_s", "\"soon\""],
        );
        assert_error(
            jobs("a,,-5,60,1,1,,,\n").unwrap_err(),
            2,
            &["field submit_s", "negative"],
        );
        assert_error(
            jobs("a,,0,1e3,1,1,,,\n").unwrap_err(),
            2,
            &["field duration_s", "1e3"],
        );
        assert_error(
            jobs("a,,0,60,1.5,1,,,\n").unwrap_err(),
            2,
            &["field gpus_per_pod", "whole number of GPUs"],
        );
        assert_error(
            jobs("a,,0,60,1,0,,,\n").unwrap_err(),
            2,
            &["field pods", "0 pods"],
        );
        assert_error(
            jobs("a,,0,60,1,two,,,\n").unwrap_err(),
            2,
            &["field pods", "\"two\""],
        );
        assert_error(
            jobs("a,,0,60,1,1,,,serve\n").unwrap_err(),
            2,
            &["field kind", "serve"],
        );
    }

    #[test]
    fn times_past_the_clocks_limit_are_rejected() {
        assert_error(
            jobs("a,,0,10,1,1,,,\nb,,18446744073709551,10,1,1,,,\n").unwrap_err(),
            3,
            &["field submit_s", "more seconds than the clock holds"],
        );
        assert_error(
            jobs("a,,999999999990,11,1,1,,,\n").unwrap_err(),
            2,
            &["field duration_s", "would end at 1000000000001 s"],
        );
        let last = jobs("a,,999999999990,10,1,1,,,\nb,,1000000000000,,1,1,,,\n").expect("parse");
        assert_eq!(last.jobs[0].submit_ms + 10_000, MAX_TIME_MS);
    }

    #[test]
    fn unknown_gpu_model_lists_the_known_ones() {
        let err = jobs("a,,0,60,1,1,H100,,\nb,,0,60,1,1,V100|B200,,\n").unwrap_err();
        assert_error(
            err,
            3,
            &["jobs.csv", "field gpu_model", "\"V100\"", "H100, A100"],
        );
        // Beside a model some node has, one no node has is left out (a warning counts
        // such rows): the job goes to the others.
        let workload = jobs("a,,0,60,1,1,V100|A100|H100,,\n").unwrap();
        let cluster = small_cluster();
        let models = [Some("A100"), Some("H100")].map(|m| cluster.pool_of_model(m).unwrap());
        assert_eq!(workload.jobs[0].pools, models);
        assert_error(
            jobs("a,,0,60,1,1,H100|,,\n").unwrap_err(),
            2,
            &["field gpu_model"],
        );
    }

    #[test]
    fn unknown_priority_class_lists_the_known_ones() {
        let err = jobs("a,,0,60,1,1,,LS,\nb,,0,60,1,1,,Burstable,\n").unwrap_err();
        assert_error(
            err,
            3,
            &["jobs.csv", "field priority", "\"Burstable\"", "BE, LS"],
        );
    }

    /// Whole numbers written as floats, as a table tool writes a column with empty cells,
    /// are read; a fraction is not.
    #[test]
    fn whole_numbers_written_as_floats_are_read() {
        let cluster = nodes("a,H100,8.0,96000.0,1024.00\n").unwrap();
        let a = cluster.node(cluster.node_id("a").unwrap());
        assert_eq!((a.gpus(), a.cpu_milli), (8, Some(96_000)));
        let workload = jobs("a,,0,10,1,2.0,,-5.0,\n").unwrap();
        assert_eq!(
            (workload.jobs[0].pods.len(), workload.jobs[0].priority),
            (2, -5)
        );
        assert_error(
            jobs("a,,0,10,1,2.5,,,\n").unwrap_err(),
            2,
            &["field pods", "\"2.5\" is not a whole number"],
        );
        assert_error(
            nodes("a,H100,-8.0,1,1\n").unwrap_err(),
            2,
            &["field gpus", "\"-8\" is negative"],
        );
    }

    #[test]
    fn node_with_gpus_but_no_model_is_rejected() {
        assert_error(
            nodes("a,H100,8,1,1\nb,,8,1,1\n").unwrap_err(),
            3,
            &["nodes.csv", "field gpu_model", "8 GPUs"],
        );
        // A model without GPUs is a CPU-only node (a warning counts them).
        let cluster = nodes("a,H100,0,1,1\nb,H100,8,1,1\n").unwrap();
        let a = cluster.node(cluster.node_id("a").unwrap());
        assert_eq!(
            (a.gpus(), a.pool),
            (0, cluster.pool_of_model(None).unwrap())
        );
        assert_error(
            nodes("a,H100,64,1,1\n").unwrap_err(),
            2,
            &["field gpus", "64 GPUs"],
        );
        assert_error(
            nodes("a,H100,8,1,1\na,H100,8,1,1\n").unwrap_err(),
            3,
            &["field node_id", "duplicate", "line 2"],
        );
    }

    #[test]
    fn a_spine_or_superspine_without_a_leaf_is_rejected() {
        let header = "node_id,gpu_model,gpus,cpu_milli,memory_mib,leaf,spine,superspine,hbd\n";
        let parse = |rows: &str| {
            let text = format!("{header}{rows}");
            parse_nodes("nodes.csv", text.as_bytes(), &options())
        };
        assert_error(
            parse("a,H100,8,,,l1,s1,ss,\nb,H100,8,,,,s1,,\n").unwrap_err(),
            3,
            &["field leaf", "spine is \"s1\""],
        );
        assert_error(
            parse("a,H100,8,,,,,ss,\n").unwrap_err(),
            2,
            &["field leaf", "superspine is \"ss\""],
        );
        let cluster = parse("a,H100,8,,,,,,h1\n").expect("an HBD needs no leaf");
        assert_eq!(cluster.hbds, ["h1"]);
    }

    #[test]
    fn missing_columns_are_named_on_the_header_line() {
        let err = parse_nodes(
            "nodes.csv",
            "node_id,gpu_model,cpu_milli,memory_mib\n".as_bytes(),
            &options(),
        )
        .unwrap_err();
        assert_error(err, 1, &["nodes.csv", "missing column gpus"]);
        let header = JOBS_HEADER.replace(",priority", "");
        let err =
            parse_jobs("jobs.csv", header.as_bytes(), &small_cluster(), &options()).unwrap_err();
        assert_error(err, 1, &["jobs.csv", "missing column priority"]);
        let err = parse_nodes("empty.csv", "".as_bytes(), &options()).unwrap_err();
        assert_error(err, 0, &["empty.csv", "the file is empty: no header"]);
        let err = parse_nodes("nodes.csv", NODES_HEADER.as_bytes(), &options()).unwrap_err();
        assert_error(err, 0, &["nodes.csv", "no nodes, only the header"]);
        let err = parse_jobs(
            "jobs.csv",
            JOBS_HEADER.as_bytes(),
            &small_cluster(),
            &options(),
        )
        .unwrap_err();
        assert_error(err, 0, &["jobs.csv", "no jobs, only the header"]);
    }

    #[test]
    fn malformed_rows_and_duplicates_are_errors() {
        assert_error(
            jobs("a,,0,60,1,1,,\n").unwrap_err(),
            2,
            &["8 fields", "header has 9"],
        );
        assert_error(
            jobs("a,,0,60,1,1,,,\na,,1,60,1,1,,,\n").unwrap_err(),
            3,
            &["field job_id", "duplicate job \"a\""],
        );
        assert_error(
            jobs(",,0,60,1,1,,,\n").unwrap_err(),
            2,
            &["field job_id", "empty"],
        );
        let err = read_nodes(Path::new("/nonexistent/kant/nodes.csv"), &options()).unwrap_err();
        assert_error(err, 0, &["/nonexistent/kant/nodes.csv", "cannot open"]);
    }

    /// Rows of huge jobs are refused at the one that takes the trace past its pods in all,
    /// before their requests exhaust memory.
    #[test]
    fn a_trace_past_its_pods_in_all_is_refused_at_the_row_that_passes_them() {
        let text = format!("{JOBS_HEADER}a,,0,10,1,6,,,\nb,,0,10,1,5,,,\n");
        let limited = TraceOptions {
            max_pods: 10,
            ..options()
        };
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &limited);
        assert_error(
            err.unwrap_err(),
            3,
            &["field pods", "more than 10 pods in all"],
        );
    }

    /// Rows past the most jobs a trace may have are refused at the first of them, a row
    /// without a duration counted too.
    #[test]
    fn a_trace_past_its_jobs_is_refused_at_the_row_that_passes_them() {
        let text = format!("{JOBS_HEADER}a,,0,10,1,1,,,\nb,,0,,1,1,,,\nc,,0,10,1,1,,,\n");
        let limited = TraceOptions {
            max_jobs: 2,
            ..options()
        };
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &limited);
        assert_error(err.unwrap_err(), 4, &["field job_id", "more than 2 jobs"]);
    }

    /// A quote left open makes the lines after it one field of its row: the error names the
    /// row's line and says where the quoted field runs to.
    #[test]
    fn an_unclosed_quote_is_named_on_its_line() {
        let text = "a,,0,10,1,1,,,\n\"b,,0,10,1,1,,,\nc,,0,10,1,1,,,\nd,,0,10,1,1,,,\n";
        assert_error(
            jobs(text).unwrap_err(),
            3,
            &[
                "row has 1 field,",
                "runs on to line 5",
                "closing quote missing",
            ],
        );
        // The last row, alone on its line.
        assert_error(
            jobs("a,,0,10,1,1,,,\n\"b,,0,10,1,1,,,\n").unwrap_err(),
            3,
            &[
                "row has 1 field,",
                "runs on to line 3, the end of the file: is a closing quote missing?",
            ],
        );
    }

    /// A quote left open in the last column takes the rows after it into its field, the
    /// row's count of fields right, or runs to the end of the file: no field holds a line
    /// break, so the row is refused on its line.
    #[test]
    fn a_quote_left_open_in_the_last_column_loses_no_row() {
        let header = "node_id,gpu_model,gpus,cpu_milli,memory_mib,leaf,spine,superspine,hbd\n";
        let text = format!(
            "{header}n1,H100,8,,,l1,s1,ss1,\"h1\nn2,H100,8,,,l1,s1,ss1,h1\nn3,H100,8,,,l1,s1,ss1,h1\n"
        );
        let err = parse_nodes("nodes.csv", text.as_bytes(), &options()).unwrap_err();
        assert_error(
            err,
            2,
            &["field hbd: a quoted field runs on to line 4, the end of the file"],
        );
        // An ignored column last, a closing quote further down.
        let text = format!(
            "{}a,,0,10,1,1,,,,\"oops\nb,,0,10,1,1,,,,x\nc,,0,10,1,1,,,,\"\nd,,0,10,1,1,,,,\n",
            JOBS_HEADER.trim_end().to_owned() + ",note\n"
        );
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &options());
        assert_error(
            err.unwrap_err(),
            2,
            &["field note: a quoted field runs on to line 4:"],
        );
        // Open at the end of a file without a last line break.
        assert_error(
            jobs("a,,0,10,1,1,,,\nb,,0,10,1,1,,,\"train").unwrap_err(),
            3,
            &["a quoted field runs on to line 3, the end of the file"],
        );
        // Its line breaks alone between the quotes, which trimming would take away.
        let text = format!(
            "{}a,,0,10,1,1,,,,\"\nb,,0,10,1,1,,,,x\n\"\nc,,0,10,1,1,,,,y\n",
            JOBS_HEADER.trim_end().to_owned() + ",note\n"
        );
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &options());
        assert_error(
            err.unwrap_err(),
            2,
            &["field note: a quoted field runs on to line 4:"],
        );
        // In the header.
        let text = format!("{},\"note\na,,0,10,1,1,,,,x\n", JOBS_HEADER.trim_end());
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &options());
        assert_error(
            err.unwrap_err(),
            1,
            &["the header's column 10: a quoted field runs on to line 2, the end of the file"],
        );
        // Quotes closed, commas and quotes inside, and a quote that opens no field (an
        // inch mark): read as before.
        let text = format!(
            "{}\"a,1\",,0,10,1,1,,,\"train\",\"a \"\"b\"\"\"\nb12\"x,,0,10,1,1,,,,27\" wide\n",
            JOBS_HEADER.trim_end().to_owned() + ",note\n"
        );
        let workload = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &options());
        let names: Vec<String> = (workload.expect("parse").jobs.iter())
            .map(|j| j.name.clone())
            .collect();
        assert_eq!(names, ["a,1", "b12\"x"]);
    }

    /// A line of spaces or tabs is blank, as an empty one is, wherever it is, and so is a
    /// row of empty fields; a short row with text is still refused on its own line.
    #[test]
    fn lines_of_spaces_are_blank_and_short_rows_are_named() {
        let text = "  \na,,0,10,1,1,,,\n \t \n,,,,,,,,\nb,,0,10,1,1,,,\n , ,,,,,,,\n   ";
        let workload = jobs(text).expect("parse");
        let names: Vec<&str> = workload.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_error(
            jobs("a,,0,10,1,1,,,\n  \n c \n").unwrap_err(),
            4,
            &["the row has 1 field, the header has 9"],
        );
        // Before the header too: the header is the first line with text.
        let text = format!(" \t\n  \r\n{JOBS_HEADER}a,,0,10,1,1,,,\nb,,x,10,1,1,,,\n");
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &options());
        assert_error(err.unwrap_err(), 5, &["field submit_s"]);
        let text = format!("  \n{}", JOBS_HEADER.replace(",priority", ""));
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &options());
        assert_error(
            err.unwrap_err(),
            2,
            &["missing column priority (the header has job_id,"],
        );
        // A UTF-8 byte-order mark (some editors write one) is no text either.
        let text = format!("\u{feff}  \n{JOBS_HEADER}a,,0,10,1,1,,,\nb,,x,10,1,1,,,\n");
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &options());
        assert_error(err.unwrap_err(), 4, &["field submit_s"]);
        let text = format!("\u{feff}\n\n{}", JOBS_HEADER.replace(",priority", ""));
        let err = parse_jobs("jobs.csv", text.as_bytes(), &small_cluster(), &options());
        assert_error(err.unwrap_err(), 3, &["missing column priority"]);
    }

    #[test]
    fn errors_name_the_true_line_past_blank_lines_and_quoted_line_breaks() {
        assert_error(
            jobs("\n\na,,0,10,1,1,,,\n\nb,,x,10,1,1,,,\n").unwrap_err(),
            6,
            &["field submit_s"],
        );
        assert_error(
            jobs("a,,0,10,1,1,,,\n\n\n\na,,0,10,1,1,,,\n").unwrap_err(),
            6,
            &["duplicate job \"a\" (first on line 2)"],
        );
        assert_error(
            jobs("a,,0,10,1,1,,,\n\n\"q\nq\",,0,10,1,1,,,\n").unwrap_err(),
            4,
            &["field job_id: a quoted field runs on to line 5"],
        );
        let crlf = JOBS_HEADER.replace('\n', "\r\n") + "\r\na,,0,10,1,1,,,\r\nb,,x,10,1,1,,,\r\n";
        let err = parse_jobs("jobs.csv", crlf.as_bytes(), &small_cluster(), &options());
        assert_error(err.unwrap_err(), 4, &["field submit_s"]);
        let cr = JOBS_HEADER.replace('\n', "\r") + "a,,0,10,1,1,,,\r\rb,,x,10,1,1,,,\r";
        let err = parse_jobs("jobs.csv", cr.as_bytes(), &small_cluster(), &options());
        assert_error(err.unwrap_err(), 4, &["field submit_s"]);
        let text = format!(
            "\n\n{}leaf,leaf\n",
            NODES_HEADER.trim_end().to_owned() + ","
        );
        let err = parse_nodes("nodes.csv", text.as_bytes(), &options()).unwrap_err();
        assert_error(err, 3, &["column leaf appears more than once"]);
    }

    #[test]
    fn columns_are_found_by_name_and_topology_is_optional() {
        let text = "hbd,gpus,node_id,leaf,memory_mib,cpu_milli,gpu_model,spine,superspine\n\
                    d0,8,x,leaf-0,,, H100 ,p1,s\n\
                    ,8,y,leaf-0,,,H100,p2,s\n\
                    ,4,z,,,,T4,,\n\
                    ,0,cpu,,1,2,,,\n";
        let cluster = parse_nodes("nodes.csv", text.as_bytes(), &options()).expect("parse");
        assert_eq!(
            cluster.leaves.len(),
            2,
            "the same leaf under two spines is two leaves"
        );
        assert_eq!(cluster.hbds, ["d0"]);
        let x = cluster.node(cluster.node_id("x").expect("x"));
        assert_eq!(x.gpu_model.as_deref(), Some("H100"));
        assert_eq!((x.cpu_milli, x.memory_bytes), (None, None));
        let z = cluster.node(cluster.node_id("z").expect("z"));
        assert_eq!(z.topology.leaf, None);
        // T4 is not in links_by_model: the default profile applies.
        assert_eq!(
            *z.links,
            crate::model::LinkMatrix::from_profile(LinkProfile::Pcie, 4).expect("matrix")
        );
        let cpu = cluster.node(cluster.node_id("cpu").expect("cpu"));
        assert_eq!((cpu.gpu_model.as_deref(), cpu.gpus()), (None, 0));
        assert_eq!(cluster.total_gpus(), 20);
        assert_eq!(cluster.nodes_with_unknown_capacity(), 3);
    }

    #[test]
    fn column_names_match_ignoring_case() {
        let text = "NODE_ID,Gpu_Model,GPUS,cpu_milli,memory_mib,Leaf,rack\nn,H100,8,,,l1,r1\n";
        let cluster = parse_nodes("nodes.csv", text.as_bytes(), &options()).expect("parse");
        assert_eq!(cluster.leaves.len(), 1, "Leaf is the leaf column");
        assert_eq!(cluster.nodes[0].gpus(), 8);
        let text = "node_id,gpu_model,gpus,cpu_milli,memory_mib,leaf,LEAF\n";
        let err = parse_nodes("nodes.csv", text.as_bytes(), &options()).unwrap_err();
        assert_error(err, 1, &["column leaf appears more than once"]);
    }

    #[test]
    fn seconds_parse_exactly() {
        assert_eq!(parse_seconds_as_ms("12"), Ok(12_000));
        assert_eq!(parse_seconds_as_ms("0.001"), Ok(1));
        assert_eq!(parse_seconds_as_ms(".5"), Ok(500));
        assert_eq!(parse_seconds_as_ms("7."), Ok(7_000));
        assert_eq!(parse_seconds_as_ms("1.0005"), Ok(1_001));
        assert_eq!(parse_seconds_as_ms("1.0004999"), Ok(1_000));
        assert_eq!(parse_seconds_as_ms("1000000000000"), Ok(MAX_TIME_MS));
        for bad in [
            "",
            ".",
            "-1",
            "1e3",
            "abc",
            "1.2.3",
            "99999999999999999999",
            "18446744073709551",
            "1000000000000.001",
        ] {
            assert!(parse_seconds_as_ms(bad).is_err(), "{bad} accepted");
        }
        for ms in [0, 1, 10, 1500, 60_000, 123_456] {
            assert_eq!(parse_seconds_as_ms(&format_seconds(ms)), Ok(ms));
        }
        assert_eq!(format_seconds(1500), "1.5");
        assert_eq!(format_seconds(60_000), "60");
    }
}
