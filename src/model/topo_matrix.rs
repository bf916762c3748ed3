//! Reading a node's GPU topology from the text `nvidia-smi topo -m` prints, the usual way
//! operators describe a GPU server (a node annotation or a config entry carries it), into a
//! [`LinkMatrix`]: the link class of every GPU pair, each GPU's NUMA node and its nearest
//! NIC.
//!
//! This file owns the parsing and validation of that text only; what a link class means and
//! how devices are chosen is `links.rs`'s. The legend and anything after the matrix are
//! ignored, as are lines before the header.

use super::{LinkClass, LinkMatrix, MAX_GPUS_PER_NODE, ModelError};

/// The information (non-link) columns that versions of `nvidia-smi` print after the link
/// columns. Any header holding a space is treated as one too.
const INFO_HEADERS: [&str; 3] = ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"];

/// One cell of the matrix, best first: the order ranks NICs (PIX is nearer than PXB even
/// though both are [`LinkClass::Pcie`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Link {
    /// `NV<n>`: a bonded set of n NVLinks.
    Nv,
    /// At most one PCIe bridge.
    Pix,
    /// Several PCIe bridges, no host bridge.
    Pxb,
    /// Through a PCIe host bridge.
    Phb,
    /// Between host bridges of one NUMA node.
    Node,
    /// Across the inter-socket link (`SOC` in old versions).
    Sys,
    /// `X`: the device itself.
    Itself,
}

impl Link {
    fn parse(cell: &str) -> Option<Link> {
        let cell = cell.to_ascii_uppercase();
        Some(match cell.as_str() {
            "X" => Link::Itself,
            "PIX" => Link::Pix,
            "PXB" => Link::Pxb,
            "PHB" => Link::Phb,
            "NODE" => Link::Node,
            "SYS" | "SOC" => Link::Sys,
            other => {
                let count = other.strip_prefix("NV")?;
                if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Link::Nv
            }
        })
    }

    fn class(self) -> LinkClass {
        match self {
            Link::Nv | Link::Itself => LinkClass::NvLink,
            Link::Pix | Link::Pxb => LinkClass::Pcie,
            Link::Phb | Link::Node => LinkClass::SameNuma,
            Link::Sys => LinkClass::CrossNuma,
        }
    }
}

/// Parses the output of `nvidia-smi topo -m` for the node `owner` names (used in errors, e.g.
/// `node gpu-17`).
///
/// The header is the first line whose first column is `GPU0`; its columns are the GPUs
/// (`GPU0`, `GPU1`, ... in order), then the NICs (any other name: `NIC0` or, in older
/// versions, `mlx5_0`), then information columns (`CPU Affinity`, `NUMA Affinity`,
/// `GPU NUMA ID` or any header with a space in it). Below it one row per GPU then one per NIC,
/// in header order, up to a blank line or the legend. Cells are separated by tabs, or by
/// whitespace in a line without tabs.
///
/// `NV<n>` is NVLink, `PIX` and `PXB` PCIe, `PHB` and `NODE` same-NUMA, `SYS` (`SOC` in old
/// versions) cross-NUMA. A GPU's NUMA node is its `NUMA Affinity` when every GPU has a single
/// integer there; otherwise GPUs linked better than `SYS` share a NUMA node (the components of
/// that relation, numbered in order of their first GPU). A GPU's NIC is the one its row
/// reaches best (`NV` < `PIX` < `PXB` < `PHB` < `NODE` < `SYS`, ties to the lower index);
/// without NIC columns every GPU is assumed to have its own NIC, numbered as the GPU (an
/// assumption: a node naming fewer NICs shares them, as for a layout).
pub fn parse_topo_matrix(owner: &str, text: &str) -> Result<LinkMatrix, ModelError> {
    let err = |m: String| ModelError::new(owner, m);
    let text = without_terminal_escapes(text);
    let mut lines = text.lines();
    let header = loop {
        let Some(line) = lines.next() else {
            return Err(err(
                "no GPU rows: no header line of GPU0, GPU1, ... columns".to_string(),
            ));
        };
        let columns = split_header(line);
        if columns.first().is_some_and(|c| *c == "GPU0") {
            break columns;
        }
    };
    if header.iter().any(|c| c.eq_ignore_ascii_case("X")) {
        return Err(err(
            "topology header is missing: the first line naming GPU0 is a matrix row".to_string(),
        ));
    }

    let info_start = header
        .iter()
        .position(|c| is_info_header(c))
        .unwrap_or(header.len());
    let (link_columns, info_columns) = header.split_at(info_start);
    let gpus = link_columns.iter().take_while(|c| is_gpu_name(c)).count();
    let nic_names = &link_columns[gpus..];
    if let Some(late) = nic_names.iter().find(|c| is_gpu_name(c)) {
        return Err(err(format!(
            "topology header column {late} comes after the NIC columns"
        )));
    }
    if link_columns[..gpus]
        .iter()
        .enumerate()
        .any(|(i, c)| *c != format!("GPU{i}"))
    {
        return Err(err(format!(
            "topology header GPU columns are not GPU0..GPU{} in order (found {})",
            gpus - 1,
            link_columns[..gpus].join(", ")
        )));
    }
    if gpus > MAX_GPUS_PER_NODE {
        return Err(err(format!(
            "topology header has {gpus} GPU columns, more than the {MAX_GPUS_PER_NODE} a node \
             may have"
        )));
    }
    if nic_names.len() > usize::from(u8::MAX) + 1 {
        return Err(err(format!(
            "topology header has {} NIC columns, more than 256",
            nic_names.len()
        )));
    }
    let numa_column = info_columns
        .iter()
        .position(|c| c.eq_ignore_ascii_case("NUMA Affinity"));

    let mut rows: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in lines {
        let line = line.trim();
        if line.is_empty() || line.contains("Legend") {
            break;
        }
        let cells = split_row(line);
        if let Some((name, cells)) = cells.split_first() {
            rows.push((name, cells.to_vec()));
        }
    }

    // Row names: GPU0..GPUn-1, then the NICs of the header, all in order.
    let names: Vec<&str> = rows.iter().map(|(name, _)| *name).collect();
    let gpu_rows: Vec<&str> = names.iter().copied().filter(|n| is_gpu_name(n)).collect();
    if gpu_rows.is_empty() {
        return Err(err("no GPU rows under the topology header".to_string()));
    }
    let gpus_in_order = gpu_rows.len() == gpus
        && names
            .iter()
            .take(gpus)
            .enumerate()
            .all(|(i, n)| *n == format!("GPU{i}"));
    if !gpus_in_order {
        return Err(err(format!(
            "GPU rows are not GPU0..GPU{} in order (found {})",
            gpus - 1,
            gpu_rows.join(", ")
        )));
    }
    if names[gpus..] != *nic_names {
        let found = if names.len() == gpus {
            "none".to_string()
        } else {
            names[gpus..].join(", ")
        };
        return Err(err(format!(
            "NIC rows are not {} in order (found {found})",
            nic_names.join(", ")
        )));
    }

    // Cells: counts, tokens and the diagonal.
    let width = link_columns.len();
    let full = width + info_columns.len();
    let mut grid: Vec<Vec<(Link, &str)>> = Vec::with_capacity(rows.len());
    for (r, (name, cells)) in rows.iter().enumerate() {
        let count_ok = if r < gpus {
            cells.len() == full
        } else {
            cells.len() == width || cells.len() == full
        };
        if !count_ok {
            let expected = if r < gpus || full == width {
                full.to_string()
            } else {
                format!("{width} or {full}")
            };
            return Err(err(format!(
                "topology row {name} has {} cells, expected {expected}",
                cells.len()
            )));
        }
        let mut row = Vec::with_capacity(width);
        for (c, &cell) in cells[..width].iter().enumerate() {
            let link = Link::parse(cell);
            if c == r {
                if link != Some(Link::Itself) {
                    return Err(err(format!(
                        "diagonal cell of {name} is \"{cell}\", expected \"X\""
                    )));
                }
            } else if link == Some(Link::Itself) {
                return Err(err(format!(
                    "link between {name} and {} is \"X\", which only the diagonal may be",
                    link_columns[c]
                )));
            }
            let Some(link) = link else {
                return Err(err(format!(
                    "unknown link \"{cell}\" between {name} and {}",
                    link_columns[c]
                )));
            };
            row.push((link, cell));
        }
        grid.push(row);
    }
    for r in 0..width {
        for c in 0..r {
            let ((a, a_text), (b, b_text)) = (grid[r][c], grid[c][r]);
            if a != b {
                return Err(err(format!(
                    "link matrix is not symmetric: {} to {} is {b_text}, {} to {} is {a_text}",
                    link_columns[c], link_columns[r], link_columns[r], link_columns[c]
                )));
            }
        }
    }

    let numa = numa_column
        .and_then(|column| {
            rows[..gpus]
                .iter()
                .map(|(_, cells)| cells[width + column].parse::<u8>().ok())
                .collect::<Option<Vec<u8>>>()
        })
        .unwrap_or_else(|| derive_numa(&grid, gpus));

    // Each GPU's NIC is one it reaches by the best link it has to any; among those, the one
    // fewest GPUs have yet, so that two GPUs behind a switch with two NICs (DGX A100) get a
    // rail each.
    let nics = nic_names.len();
    let mut paired = vec![0u32; nics];
    let nic: Vec<u8> = (0..gpus)
        .map(|g| {
            let link = |k: usize| grid[g][gpus + k].0;
            let Some(best) = (0..nics).map(link).min() else {
                return g as u8;
            };
            let k = (0..nics)
                .filter(|&k| link(k) == best)
                .min_by_key(|&k| (paired[k], k))
                .unwrap_or(0);
            paired[k] += 1;
            k as u8
        })
        .collect();

    let mut classes = Vec::with_capacity(gpus * gpus);
    for row in &grid[..gpus] {
        classes.extend(row[..gpus].iter().map(|(link, _)| link.class()));
    }
    let matrix = LinkMatrix::new(owner, gpus, classes, numa, nic)?;
    Ok(if nics == 0 {
        matrix.with_nics_assumed()
    } else {
        matrix.with_nic_names(named_nics(nic_names, &text))
    })
}

/// The NICs' own names: the legend's (`NIC0: mlx5_0`) for columns named `NIC0`, `NIC1`,
/// ... as current versions print them, or the columns' names (`mlx5_0`) as older ones
/// print them; none when the legend does not name every NIC.
fn named_nics(columns: &[&str], text: &str) -> Vec<String> {
    if !(columns.iter().enumerate()).all(|(i, c)| *c == format!("NIC{i}")) {
        return columns.iter().map(|c| (*c).to_owned()).collect();
    }
    let legend: Vec<(&str, &str)> = (text.lines())
        .filter_map(|line| {
            let (nic, name) = line.trim().split_once(':')?;
            let name = name.trim();
            (nic.starts_with("NIC") && !name.is_empty() && !name.contains(char::is_whitespace))
                .then_some((nic, name))
        })
        .collect();
    (columns.iter())
        .map(|column| {
            let (_, name) = legend.iter().find(|(nic, _)| nic == column)?;
            Some((*name).to_owned())
        })
        .collect::<Option<Vec<String>>>()
        .unwrap_or_default()
}

/// [`parse_topo_matrix`], failing also when the matrix describes a number of GPUs other than
/// the node's `gpus`.
pub fn parse_topo_matrix_expecting(
    owner: &str,
    text: &str,
    gpus: usize,
) -> Result<LinkMatrix, ModelError> {
    let matrix = parse_topo_matrix(owner, text)?;
    if matrix.devices() != gpus {
        return Err(ModelError::new(
            owner,
            format!(
                "topology matrix has {} GPUs, the node has {gpus}",
                matrix.devices()
            ),
        ));
    }
    Ok(matrix)
}

/// NUMA nodes derived from the links: the components of "linked better than SYS", numbered
/// in order of their first GPU.
fn derive_numa(grid: &[Vec<(Link, &str)>], gpus: usize) -> Vec<u8> {
    let mut numa: Vec<Option<u8>> = vec![None; gpus];
    let mut next = 0u8;
    for seed in 0..gpus {
        if numa[seed].is_some() {
            continue;
        }
        numa[seed] = Some(next);
        let mut stack = vec![seed];
        while let Some(g) = stack.pop() {
            for other in 0..gpus {
                if numa[other].is_none() && grid[g][other].0 != Link::Sys {
                    numa[other] = Some(next);
                    stack.push(other);
                }
            }
        }
        next += 1;
    }
    numa.into_iter().map(|n| n.unwrap_or(0)).collect()
}

fn is_gpu_name(name: &str) -> bool {
    name.strip_prefix("GPU")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_info_header(name: &str) -> bool {
    name.contains(' ') || INFO_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// The columns of the header line. With tabs, the tab-separated cells. Without, GPU and NIC
/// names (which hold no spaces) are split on whitespace up to the first known information
/// header (so a one-space gap left by expanded tabs after a 7-letter name such as `mlx5_10`
/// still separates), and the rest on runs of 2+ spaces.
/// The text without terminal control sequences: `nvidia-smi topo -m` run on a terminal
/// (`kubectl exec -t`, `ssh -t`) underlines its header with `ESC[4m` ... `ESC[0m`.
fn without_terminal_escapes(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\x1b') {
        return text.into();
    }
    let mut clean = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            clean.push(c);
        } else if chars.next() == Some('[') {
            // A control sequence ends at its first byte in `@`..=`~`.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    clean.into()
}

fn split_header(line: &str) -> Vec<&str> {
    if line.contains('\t') {
        return line
            .split('\t')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
    }
    let (names, info) = match INFO_HEADERS.iter().filter_map(|h| line.find(h)).min() {
        Some(at) => line.split_at(at),
        None => (line, ""),
    };
    let mut columns: Vec<&str> = if info.is_empty() {
        split_on_wide_spaces(names)
    } else {
        names.split_whitespace().collect()
    };
    columns.extend(split_on_wide_spaces(info));
    columns
}

fn split_on_wide_spaces(text: &str) -> Vec<&str> {
    text.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// The cells of a matrix row: tab-separated when the line has tabs (empty cells dropped),
/// else whitespace-separated.
fn split_row(line: &str) -> Vec<&str> {
    if line.contains('\t') {
        line.split('\t')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect()
    } else {
        line.split_whitespace().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: &str = "node gpu-17";

    const EXAMPLE: &str = "\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV12\tPXB\tSYS\tPIX\tSYS\t0-47\t0\t\tN/A
GPU1\tNV12\t X \tSYS\tPXB\tPXB\tSYS\t0-47\t0\t\tN/A
GPU2\tPXB\tSYS\t X \tNV12\tSYS\tPIX\t48-95\t1\t\tN/A
GPU3\tSYS\tPXB\tNV12\t X \tSYS\tPXB\t48-95\t1\t\tN/A
NIC0\tPIX\tPXB\tSYS\tSYS\t X \tSYS
NIC1\tSYS\tSYS\tPIX\tPXB\tSYS\t X 

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
";

    /// The matrix `LinkMatrix::new` builds from classes given as letters (N, P, S, C for
    /// NVLink, PCIe, same-NUMA, cross-NUMA; the diagonal is N as the parser writes it).
    fn expected(rows: &[&str], numa: &[u8], nic: &[u8]) -> LinkMatrix {
        let classes = rows
            .iter()
            .flat_map(|row| row.chars())
            .map(|c| match c {
                'N' => LinkClass::NvLink,
                'P' => LinkClass::Pcie,
                'S' => LinkClass::SameNuma,
                _ => LinkClass::CrossNuma,
            })
            .collect();
        LinkMatrix::new("expected", rows.len(), classes, numa.to_vec(), nic.to_vec()).unwrap()
    }

    /// [`expected`] for a matrix without NIC columns: its NICs, one per GPU, assumed.
    fn expected_without_nics(rows: &[&str], numa: &[u8]) -> LinkMatrix {
        let nic: Vec<u8> = (0..rows.len() as u8).collect();
        expected(rows, numa, &nic).with_nics_assumed()
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn message(text: &str) -> String {
        parse_topo_matrix(OWNER, text).unwrap_err().to_string()
    }

    #[test]
    fn parses_the_example_with_affinity_columns_and_legend() {
        let m = parse_topo_matrix(OWNER, EXAMPLE).unwrap();
        assert_eq!(m.devices(), 4);
        assert_eq!(m.class(0, 1), LinkClass::NvLink);
        assert_eq!(m.class(0, 2), LinkClass::Pcie);
        assert_eq!(m.class(0, 3), LinkClass::CrossNuma);
        assert_eq!(m.class(1, 3), LinkClass::Pcie);
        assert_eq!(m.class(3, 2), LinkClass::NvLink);
        // GPU1's best NIC is NIC0 (PXB), GPU3's is NIC1 (PXB).
        assert_eq!((m.nic(0), m.nic(1), m.nic(2), m.nic(3)), (0, 0, 1, 1));
        // The NICs are named by the legend.
        let want = expected(
            &["NNPC", "NNCP", "PCNN", "CPNN"],
            &[0, 0, 1, 1],
            &[0, 0, 1, 1],
        )
        .with_nic_names(names(&["mlx5_0", "mlx5_1"]));
        assert_eq!(m, want);
        assert_eq!(
            parse_topo_matrix_expecting(OWNER, EXAMPLE, 4).unwrap(),
            want
        );
    }

    #[test]
    fn gpus_behind_one_switch_with_two_nics_get_one_each() {
        // DGX A100: each PCIe switch holds two GPUs and two NICs, PXB to both.
        let mut text = String::from("\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tNIC2\tNIC3\n");
        let switch = |i: usize| (i % 4) / 2;
        for r in 0..8 {
            text += &if r < 4 {
                format!("GPU{r}")
            } else {
                format!("NIC{}", r - 4)
            };
            for c in 0..8 {
                let cell = match (r == c, r < 4 && c < 4, switch(r) == switch(c)) {
                    (true, _, _) => "X",
                    (_, true, _) => "NV12",
                    (_, _, true) => "PXB",
                    _ => "SYS",
                };
                text += &format!("\t{cell}");
            }
            text += "\n";
        }
        let m = parse_topo_matrix(OWNER, &text).unwrap();
        assert_eq!((0..4).map(|d| m.nic(d)).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    #[test]
    fn parses_a_dgx_style_nvswitch_board() {
        let gpus = 8;
        let half = |i: usize| i / 4;
        let mut text = String::new();
        for i in 0..gpus {
            text += &format!("\tGPU{i}");
        }
        for k in 0..gpus {
            text += &format!("\tNIC{k}");
        }
        text += "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n";
        for r in 0..2 * gpus {
            let name = if r < gpus {
                format!("GPU{r}")
            } else {
                format!("NIC{}", r - gpus)
            };
            text += &name;
            for c in 0..2 * gpus {
                let (a, b) = (r % gpus, c % gpus);
                let cell = if r == c {
                    " X "
                } else if r < gpus && c < gpus {
                    "NV18"
                } else if a == b {
                    "PIX"
                } else if half(a) == half(b) {
                    "NODE"
                } else {
                    "SYS"
                };
                text += &format!("\t{cell}");
            }
            if r < gpus {
                let h = half(r);
                text += &format!("\t{}-{}\t{h}\t\tN/A", h * 48, h * 48 + 47);
            }
            text += "\n";
        }
        text += "\nLegend:\n\n  X    = Self\n";

        let m = parse_topo_matrix_expecting(OWNER, &text, 8).unwrap();
        for i in 0..gpus {
            assert_eq!(m.nic(i), i as u8);
        }
        let all_nv = ["NNNNNNNN"; 8];
        let nic: Vec<u8> = (0..8).collect();
        assert_eq!(m, expected(&all_nv, &[0, 0, 0, 0, 1, 1, 1, 1], &nic));
    }

    #[test]
    fn parses_old_mlx5_headers_separated_by_spaces() {
        let text = "
        GPU0    GPU1    GPU2    GPU3    mlx5_0  mlx5_1  CPU Affinity
GPU0     X      PIX     SYS     SYS     PHB     SYS     0-11
GPU1    PIX      X      SYS     SYS     NODE    SYS     0-11
GPU2    SYS     SYS      X      PXB     SYS     PIX     12-23
GPU3    SYS     SYS     PXB      X      SYS     PHB     12-23
mlx5_0  PHB     NODE    SYS     SYS      X      SYS
mlx5_1  SYS     SYS     PIX     PHB     SYS      X

Legend:
";
        let m = parse_topo_matrix(OWNER, text).unwrap();
        // No NUMA Affinity column: derived from the SYS links. The NICs are named by their
        // columns.
        let want = expected(
            &["NPCC", "PNCC", "CCNP", "CCPN"],
            &[0, 0, 1, 1],
            &[0, 0, 1, 1],
        );
        assert_eq!(m, want.with_nic_names(names(&["mlx5_0", "mlx5_1"])));
    }

    #[test]
    fn expanded_tabs_may_leave_one_space_after_a_long_nic_name() {
        let text = "        GPU0    GPU1    mlx5_10 mlx5_11 CPU Affinity    NUMA Affinity
GPU0     X      SYS     SYS     PIX     0-11    0
GPU1    SYS      X      PIX     SYS     12-23   1
mlx5_10 SYS     PIX      X      SYS
mlx5_11 PIX     SYS     SYS      X
";
        let m = parse_topo_matrix(OWNER, text).unwrap();
        let want = expected(&["NC", "CN"], &[0, 1], &[1, 0]);
        assert_eq!(m, want.with_nic_names(names(&["mlx5_10", "mlx5_11"])));
    }

    #[test]
    fn a_header_underlined_by_a_terminal_reads_as_plain() {
        // `nvidia-smi topo -m` on a terminal wraps its header in `ESC[4m` ... `ESC[0m`.
        let plain = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\t0-59\t0\t\tN/A
GPU1\tNV18\t X \t0-59\t0\t\tN/A
";
        let underlined = plain.replacen("\tGPU0", "\t\x1b[4mGPU0", 1).replacen(
            "GPU NUMA ID",
            "GPU NUMA ID\x1b[0m",
            1,
        );
        assert_eq!(
            parse_topo_matrix(OWNER, &underlined).unwrap(),
            parse_topo_matrix(OWNER, plain).unwrap()
        );
    }

    #[test]
    fn without_nic_columns_every_gpu_has_its_own_nic() {
        let text = "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV4\tSYS\tSYS\t0-15\t0
GPU1\tNV4\t X \tSYS\tSYS\t0-15\t0
GPU2\tSYS\tSYS\t X \tPHB\t16-31\t1
GPU3\tSYS\tSYS\tPHB\t X \t16-31\t1
";
        let m = parse_topo_matrix(OWNER, text).unwrap();
        let want = expected_without_nics(&["NNCC", "NNCC", "CCNS", "CCSN"], &[0, 0, 1, 1]);
        assert_eq!(m, want);
        assert!(m.nics_assumed(), "a node naming fewer NICs shares them");
    }

    #[test]
    fn numa_is_derived_from_links_without_a_usable_numa_column() {
        // Components of "better than SYS": {0, 1, 4} (0-4 only through 1), {2, 3}, {5}.
        let rows = [
            "GPU0 X NODE SYS SYS SYS SYS",
            "GPU1 NODE X SYS SYS PIX SYS",
            "GPU2 SYS SYS X NV4 SYS SYS",
            "GPU3 SYS SYS NV4 X SYS SYS",
            "GPU4 SYS PIX SYS SYS X SYS",
            "GPU5 SYS SYS SYS SYS SYS X",
        ];
        let want = expected_without_nics(
            &["NSCCCC", "SNCCPC", "CCNNCC", "CCNNCC", "CPCCNC", "CCCCCN"],
            &[0, 0, 1, 1, 0, 2],
        );
        let bare = format!(
            "  GPU0  GPU1  GPU2  GPU3  GPU4  GPU5\n{}\n",
            rows.join("\n")
        );
        assert_eq!(parse_topo_matrix(OWNER, &bare).unwrap(), want);

        // A NUMA column with a range or N/A in it is not used (for any GPU).
        let numa = ["0", "0-1", "N/A", "1", "0", "1"];
        let mut with_column = "  GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  NUMA Affinity\n".to_string();
        for (row, numa) in rows.iter().zip(numa) {
            with_column += &format!("{row} {numa}\n");
        }
        assert_eq!(parse_topo_matrix(OWNER, &with_column).unwrap(), want);
    }

    #[test]
    fn accepts_old_soc_for_cross_socket() {
        let text = "\tGPU0\tGPU1\nGPU0\t X \tSOC\nGPU1\tSOC\t X \n";
        let m = parse_topo_matrix(OWNER, text).unwrap();
        assert_eq!(m, expected_without_nics(&["NC", "CN"], &[0, 1]));
    }

    /// The example without its information columns and legend.
    fn bare_example() -> String {
        EXAMPLE
            .lines()
            .take_while(|l| !l.is_empty())
            .map(|l| l.split('\t').take(7).collect::<Vec<_>>().join("\t") + "\n")
            .collect()
    }

    #[test]
    fn rejects_a_row_with_the_wrong_cell_count() {
        let bare = bare_example();
        assert!(parse_topo_matrix(OWNER, &bare).is_ok());
        let text = bare.replace(
            "GPU2\tPXB\tSYS\t X \tNV12\tSYS\tPIX",
            "GPU2\tPXB\tSYS\t X \tNV12\tSYS",
        );
        assert_eq!(
            message(&text),
            "node gpu-17: topology row GPU2 has 5 cells, expected 6"
        );
        let nic_short = EXAMPLE.replace("NIC0\tPIX\tPXB\tSYS\tSYS\t X \tSYS", "NIC0\tPIX\tPXB");
        assert_eq!(
            message(&nic_short),
            "node gpu-17: topology row NIC0 has 2 cells, expected 6 or 9"
        );
        let gpu_no_info = EXAMPLE.replace("\t48-95\t1\t\tN/A\nGPU3", "\nGPU3");
        assert_eq!(
            message(&gpu_no_info),
            "node gpu-17: topology row GPU2 has 6 cells, expected 9"
        );
    }

    #[test]
    fn rejects_an_unknown_link() {
        let text = EXAMPLE.replace("GPU0\t X \tNV12\tPXB\tSYS", "GPU0\t X \tNV12\tPXB\tNVX");
        assert_eq!(
            message(&text),
            "node gpu-17: unknown link \"NVX\" between GPU0 and GPU3"
        );
        let text = EXAMPLE.replace("NIC1\tSYS\tSYS\tPIX", "NIC1\tSYS\tSYS\tQPI");
        assert_eq!(
            message(&text),
            "node gpu-17: unknown link \"QPI\" between NIC1 and GPU2"
        );
    }

    #[test]
    fn rejects_missing_or_misordered_rows() {
        let mut lines: Vec<&str> = EXAMPLE.lines().collect();
        lines.swap(2, 3);
        let swapped = lines.join("\n");
        assert_eq!(
            message(&swapped),
            "node gpu-17: GPU rows are not GPU0..GPU3 in order (found GPU0, GPU2, GPU1, GPU3)"
        );
        let missing: String = EXAMPLE
            .lines()
            .filter(|l| !l.starts_with("GPU3"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            message(&missing),
            "node gpu-17: GPU rows are not GPU0..GPU3 in order (found GPU0, GPU1, GPU2)"
        );
        let no_nic_rows: String = EXAMPLE
            .lines()
            .filter(|l| !l.starts_with("NIC"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            message(&no_nic_rows),
            "node gpu-17: NIC rows are not NIC0, NIC1 in order (found none)"
        );
        let header_order = EXAMPLE.replacen("\tGPU1\tGPU2", "\tGPU2\tGPU1", 1);
        assert_eq!(
            message(&header_order),
            "node gpu-17: topology header GPU columns are not GPU0..GPU3 in order \
             (found GPU0, GPU2, GPU1, GPU3)"
        );
    }

    #[test]
    fn rejects_text_without_gpu_rows_or_header() {
        assert_eq!(
            message(""),
            "node gpu-17: no GPU rows: no header line of GPU0, GPU1, ... columns"
        );
        assert_eq!(
            message("Legend:\n\n  X    = Self\n"),
            "node gpu-17: no GPU rows: no header line of GPU0, GPU1, ... columns"
        );
        assert_eq!(
            message("\tGPU0\tGPU1\tCPU Affinity\n\nLegend:\n"),
            "node gpu-17: no GPU rows under the topology header"
        );
        let headless: String = EXAMPLE.lines().skip(1).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            message(&headless),
            "node gpu-17: topology header is missing: the first line naming GPU0 is a matrix row"
        );
    }

    #[test]
    fn rejects_x_off_the_diagonal_and_links_on_it() {
        let off = EXAMPLE.replace("GPU0\t X \tNV12\tPXB", "GPU0\t X \tNV12\tX");
        assert_eq!(
            message(&off),
            "node gpu-17: link between GPU0 and GPU2 is \"X\", which only the diagonal may be"
        );
        let on = EXAMPLE.replace("GPU1\tNV12\t X ", "GPU1\tNV12\tNV12");
        assert_eq!(
            message(&on),
            "node gpu-17: diagonal cell of GPU1 is \"NV12\", expected \"X\""
        );
    }

    #[test]
    fn rejects_asymmetric_links() {
        let gpus = EXAMPLE.replace("GPU2\tPXB\tSYS", "GPU2\tSYS\tSYS");
        assert_eq!(
            message(&gpus),
            "node gpu-17: link matrix is not symmetric: GPU0 to GPU2 is PXB, GPU2 to GPU0 is SYS"
        );
        let nic = EXAMPLE.replace("NIC0\tPIX\tPXB", "NIC0\tPIX\tPIX");
        assert_eq!(
            message(&nic),
            "node gpu-17: link matrix is not symmetric: GPU1 to NIC0 is PXB, NIC0 to GPU1 is PIX"
        );
    }

    #[test]
    fn rejects_more_gpus_than_a_node_may_have() {
        let gpus = MAX_GPUS_PER_NODE + 1;
        let mut text: String = (0..gpus).map(|i| format!("\tGPU{i}")).collect();
        text += "\n";
        for r in 0..gpus {
            text += &format!("GPU{r}");
            for c in 0..gpus {
                text += if r == c { "\tX" } else { "\tNV1" };
            }
            text += "\n";
        }
        assert_eq!(
            message(&text),
            "node gpu-17: topology header has 33 GPU columns, more than the 32 a node may have"
        );
    }

    #[test]
    fn expecting_checks_the_gpu_count() {
        let err = parse_topo_matrix_expecting(OWNER, EXAMPLE, 8).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node gpu-17: topology matrix has 4 GPUs, the node has 8"
        );
        assert_eq!(err.object, OWNER);
    }
}
