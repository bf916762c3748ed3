//! Tenants and their quotas per GPU model: static quota admission and the accounting of
//! what each tenant uses, owns and borrows. Quotas are in GPUs in the configuration and in
//! milli-GPUs here.
//!
//! A `shared` tenant may borrow what other shared tenants leave idle, and the capacity no
//! tenant's quota covers; it lends its own idle quota. An `isolated` tenant never goes past
//! its quota and lends nothing: its quota is held for it alone. The `default` tenant takes
//! jobs that name none; it is shared with no quota of its own unless configured.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::{ClusterSpec, Job, MILLI_PER_GPU, PoolId};

/// The name of the tenant that takes jobs naming none.
pub const DEFAULT_TENANT: &str = "default";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TenantMode {
    Shared,
    Isolated,
}

/// One tenant as the configuration declares it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub name: String,
    #[serde(default = "shared")]
    pub mode: TenantMode,
    /// Weight of its fair share across tenants (default 1).
    #[serde(default = "one")]
    pub weight: f64,
    /// GPUs per GPU model.
    #[serde(default)]
    pub quota: BTreeMap<String, i64>,
}

fn shared() -> TenantMode {
    TenantMode::Shared
}

fn one() -> f64 {
    1.0
}

/// The most GPUs one quota entry may name: far beyond any cluster, and small enough that
/// the milli-GPU sums over millions of tenants cannot overflow.
pub const MAX_QUOTA_GPUS: i64 = 1 << 32;

/// The most tenants (Queues), the default one included: a job's tenant is a 16-bit index.
pub const MAX_TENANTS: usize = 1 << 16;

impl TenantConfig {
    /// Checks what can be checked without a cluster: the weight, and the quota's sign and
    /// size.
    pub fn validate(&self) -> Result<(), String> {
        let name = &self.name;
        if name.is_empty() {
            return Err("a tenant has an empty name".into());
        }
        if name.trim() != name {
            return Err(format!(
                "tenant \"{name}\": spaces around the name (a trace's tenant is read \
                 trimmed, so no job could name it)"
            ));
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(format!(
                "tenant {name}: weight {} must be positive",
                self.weight
            ));
        }
        if let Some((model, gpus)) = self.quota.iter().find(|(_, g)| **g < 0) {
            return Err(format!(
                "tenant {name}: quota {gpus} of {model} is negative"
            ));
        }
        if let Some((model, gpus)) = self.quota.iter().find(|(_, g)| **g > MAX_QUOTA_GPUS) {
            return Err(format!(
                "tenant {name}: quota {gpus} of {model} is more than {MAX_QUOTA_GPUS} GPUs"
            ));
        }
        Ok(())
    }
}

/// What static admission decided for a job, best first (the order compares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Admission {
    /// The tenant's own idle quota covers it.
    Own,
    /// It needs idle quota of others (a shared tenant only).
    Borrow,
    /// Neither covers it now.
    Denied,
}

/// The tenants resolved against one cluster, with what each uses per pool. A copy (the
/// what-if accounts preemption weighs) shares what only the configuration and the cluster's
/// shape change, and copies the accounts alone.
#[derive(Debug, Clone)]
pub struct Tenants {
    roster: Arc<Roster>,
    /// `[tenant][pool]` in use by placed jobs, milli-GPUs.
    used: Vec<Vec<u64>>,
    /// Per pool, milli-GPUs shared tenants cannot have: what isolated tenants hold (their
    /// quota, or more if they use more) plus what shared tenants use. Kept by `charge`, so
    /// that admission costs O(the job's pools).
    held: Vec<u64>,
}

/// The tenants as configured, against the cluster's pools.
#[derive(Debug, Clone)]
struct Roster {
    names: Vec<String>,
    /// Index by name.
    by_name: HashMap<String, usize>,
    modes: Vec<TenantMode>,
    weights: Vec<f64>,
    /// `[tenant][pool]` quota, milli-GPUs.
    quota: Vec<Vec<u64>>,
    /// Milli-GPUs per pool.
    capacity: Vec<u64>,
    /// Per pool, the sum of the isolated tenants' quotas.
    isolated_quota: Vec<u64>,
}

impl Tenants {
    /// Resolves the configured tenants against the cluster's GPU models. The default
    /// tenant is index 0 (added if not configured). Fails on a quota for a GPU model the
    /// cluster does not have.
    pub fn resolve(configs: &[TenantConfig], cluster: &ClusterSpec) -> Result<Tenants, String> {
        let pools = cluster.pools.len();
        let mut roster = Roster {
            names: vec![DEFAULT_TENANT.to_owned()],
            by_name: HashMap::from([(DEFAULT_TENANT.to_owned(), 0)]),
            modes: vec![TenantMode::Shared],
            weights: vec![1.0],
            quota: vec![vec![0; pools]],
            capacity: pool_capacities(cluster),
            isolated_quota: Vec::new(),
        };
        let mut declared = HashSet::new();
        for config in configs {
            config.validate()?;
            if !declared.insert(config.name.as_str()) {
                return Err(format!("tenant {} is declared twice", config.name));
            }
            let index = match roster.by_name.get(&config.name).copied() {
                // The default tenant, configured.
                Some(index) => index,
                None if roster.names.len() == MAX_TENANTS => {
                    return Err(format!(
                        "tenant {}: more than {MAX_TENANTS} tenants, the default one included",
                        config.name
                    ));
                }
                None => {
                    let index = roster.names.len();
                    roster.by_name.insert(config.name.clone(), index);
                    roster.names.push(config.name.clone());
                    roster.modes.push(config.mode);
                    roster.weights.push(config.weight);
                    roster.quota.push(vec![0; pools]);
                    index
                }
            };
            roster.modes[index] = config.mode;
            roster.weights[index] = config.weight;
            for (model, &gpus) in &config.quota {
                let pool = cluster.pool_of_model(Some(model)).ok_or_else(|| {
                    let known: Vec<&str> = cluster.gpu_models().collect();
                    format!(
                        "tenant {}: quota for unknown GPU model \"{model}\" (the cluster has: {})",
                        config.name,
                        known.join(", ")
                    )
                })?;
                roster.quota[index][pool.index()] = (gpus as u64)
                    .checked_mul(u64::from(MILLI_PER_GPU))
                    .ok_or_else(|| {
                        format!(
                            "tenant {}: quota {gpus} of {model} is too large",
                            config.name
                        )
                    })?;
            }
        }
        let mut tenants = Tenants {
            used: vec![vec![0; pools]; roster.names.len()],
            roster: Arc::new(roster),
            held: Vec::new(),
        };
        tenants.recount();
        Ok(tenants)
    }

    /// Follows the cluster to a new shape (nodes came or went): pool capacities are
    /// recomputed, and pools added since (the cluster keeps pool ids) start with no quota
    /// and no use.
    pub fn follow_cluster(&mut self, cluster: &ClusterSpec) {
        let roster = Arc::make_mut(&mut self.roster);
        roster.capacity = pool_capacities(cluster);
        let pools = roster.capacity.len();
        for row in roster.quota.iter_mut().chain(self.used.iter_mut()) {
            row.resize(pools.max(row.len()), 0);
        }
        self.recount();
    }

    /// Recomputes the per-pool sums `held` and `isolated_quota` from the tenants.
    fn recount(&mut self) {
        let pools = self.roster.quota.first().map_or(0, Vec::len);
        self.held = (0..pools)
            .map(|p| (0..self.len()).map(|t| self.holds(t, p)).sum())
            .collect();
        let isolated_quota = (0..pools)
            .map(|p| {
                (0..self.len())
                    .filter(|&t| self.roster.modes[t] == TenantMode::Isolated)
                    .map(|t| self.roster.quota[t][p])
                    .sum()
            })
            .collect();
        Arc::make_mut(&mut self.roster).isolated_quota = isolated_quota;
    }

    /// Milli-GPUs of `pool` the tenant keeps from shared tenants: an isolated tenant its
    /// quota (or more, if it uses more), a shared one what it uses.
    fn holds(&self, tenant: usize, pool: usize) -> u64 {
        match self.roster.modes[tenant] {
            TenantMode::Isolated => self.roster.quota[tenant][pool].max(self.used[tenant][pool]),
            TenantMode::Shared => self.used[tenant][pool],
        }
    }

    pub fn len(&self) -> usize {
        self.roster.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.roster.names.is_empty()
    }

    pub fn name(&self, tenant: usize) -> &str {
        &self.roster.names[tenant]
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.roster.by_name.get(name).copied()
    }

    pub fn mode(&self, tenant: usize) -> TenantMode {
        self.roster.modes[tenant]
    }

    /// The pools a job's quota is counted in: the ones it names, or every GPU pool.
    fn pools_of<'a>(&'a self, job: &'a Job) -> impl Iterator<Item = usize> + 'a {
        let every_pool = if job.pools.is_empty() {
            self.roster.capacity.len()
        } else {
            0
        };
        let named = job.pools.iter().map(|p| p.index());
        named.chain((0..every_pool).filter(|&p| self.roster.capacity[p] > 0))
    }

    /// Milli-GPUs the tenant may still use on `pool` from its own quota.
    fn own_room(&self, tenant: usize, pool: usize) -> u64 {
        self.roster.quota[tenant][pool].saturating_sub(self.used[tenant][pool])
    }

    /// Milli-GPUs of `pool` free for shared tenants: the pool less what isolated tenants
    /// hold (their quota, always) and what shared tenants use.
    fn shared_free(&self, pool: usize) -> u64 {
        self.roster.capacity[pool].saturating_sub(self.held[pool])
    }

    /// Static quota admission: does the tenant's quota, or what it may borrow, cover the
    /// job on a GPU model it accepts? A job's GPU pods all land in one pool, so each pool
    /// is judged alone, and the best verdict over the job's pools is the job's (the search
    /// then keeps to the pools admitted, [`Tenants::admits_on`]). An isolated tenant is
    /// held to its own quota. A shared tenant needs the room free for shared tenants,
    /// within its own quota (`Own`) or beyond it (`Borrow`); when others borrowed its idle
    /// quota, it is `Denied` until it reclaims it. CPU-only jobs always pass.
    pub fn admit(&self, tenant: usize, job: &Job) -> Admission {
        self.admit_milli(tenant, job, job.total_milli())
    }

    /// [`Tenants::admit`] for a job whose milli-GPUs in all, `need`, are known.
    pub fn admit_milli(&self, tenant: usize, job: &Job, need: u64) -> Admission {
        if need == 0 {
            return Admission::Own;
        }
        self.pools_of(job)
            .map(|pool| self.admit_on(tenant, pool, need))
            .min()
            .unwrap_or(Admission::Denied)
    }

    /// Whether static admission lets the job land on `pool` (one it accepts).
    pub fn admits_on(&self, tenant: usize, job: &Job, pool: PoolId) -> bool {
        let need = job.total_milli();
        need == 0 || self.admit_on(tenant, pool.index(), need) != Admission::Denied
    }

    /// Static quota admission of `need` milli-GPUs on one pool.
    fn admit_on(&self, tenant: usize, pool: usize, need: u64) -> Admission {
        let own = self.own_room(tenant, pool) >= need;
        if self.roster.modes[tenant] == TenantMode::Isolated {
            return if own {
                Admission::Own
            } else {
                Admission::Denied
            };
        }
        match (self.shared_free(pool) >= need, own) {
            (true, true) => Admission::Own,
            (true, false) => Admission::Borrow,
            (false, _) => Admission::Denied,
        }
    }

    /// The most milli-GPUs admission could grant the tenant now on one pool: a bound on
    /// [`Tenants::admit`], which denies any job asking for more.
    pub fn admission_room(&self, tenant: usize) -> u64 {
        let pools = 0..self.roster.capacity.len();
        let room = match self.roster.modes[tenant] {
            TenantMode::Isolated => pools.map(|p| self.own_room(tenant, p)).max(),
            TenantMode::Shared => pools.map(|p| self.shared_free(p)).max(),
        };
        room.unwrap_or(0)
    }

    /// Whether the job could be admitted were nothing else running: on one of its pools,
    /// its tenant's quota (if isolated) or the pool less the isolated tenants' quotas (if
    /// shared: admission grants a shared tenant no more than that room, however large its
    /// own quota) covers it.
    pub fn could_ever_admit(&self, tenant: usize, job: &Job) -> bool {
        let need = job.total_milli();
        need == 0 || self.pools_of(job).any(|p| self.ceiling(tenant, p) >= need)
    }

    /// The most admission could ever grant the tenant on each of the job's pools, in
    /// words (`cluster` names the pools): why a job larger than each waits for good.
    pub fn ceilings(&self, tenant: usize, job: &Job, cluster: &ClusterSpec) -> String {
        let each: Vec<String> = self
            .pools_of(job)
            .map(|p| {
                let gpus = self.ceiling(tenant, p) as f64 / f64::from(MILLI_PER_GPU);
                let model = cluster
                    .pools
                    .get(p)
                    .and_then(|pool| pool.gpu_model.as_deref());
                format!(
                    "{gpus} {}",
                    model.unwrap_or("GPUs of the pool without a model")
                )
            })
            .collect();
        if each.is_empty() {
            return "no pool of the GPU models it accepts has GPUs".into();
        }
        match self.roster.modes[tenant] {
            TenantMode::Isolated => format!("isolated, its quota is {}", each.join(", ")),
            TenantMode::Shared => format!(
                "shared, it is granted at most what the isolated tenants' quotas leave: {}",
                each.join(", ")
            ),
        }
    }

    /// Whether the job could be admitted on `pool` (one it accepts) were nothing else
    /// running.
    pub fn could_ever_admit_on(&self, tenant: usize, job: &Job, pool: PoolId) -> bool {
        let need = job.total_milli();
        need == 0 || self.ceiling(tenant, pool.index()) >= need
    }

    /// The most milli-GPUs admission could ever grant the tenant on one pool.
    fn ceiling(&self, tenant: usize, pool: usize) -> u64 {
        match self.roster.modes[tenant] {
            TenantMode::Isolated => self.roster.quota[tenant][pool],
            TenantMode::Shared => {
                self.roster.capacity[pool].saturating_sub(self.roster.isolated_quota[pool])
            }
        }
    }

    /// Records `milli` more (or, negative, less) in use by the tenant on a pool.
    pub fn charge(&mut self, tenant: usize, pool: PoolId, milli: i64) {
        let pool = pool.index();
        let before = self.holds(tenant, pool);
        let used = &mut self.used[tenant][pool];
        *used = (*used as i64 + milli).max(0) as u64;
        self.held[pool] = self.held[pool] - before + self.holds(tenant, pool);
    }

    pub fn used(&self, tenant: usize, pool: PoolId) -> u64 {
        self.used[tenant][pool.index()]
    }

    pub fn quota(&self, tenant: usize, pool: PoolId) -> u64 {
        self.roster.quota[tenant][pool.index()]
    }

    /// Milli-GPUs the tenant uses beyond its quota on a pool.
    pub fn borrowed(&self, tenant: usize, pool: PoolId) -> u64 {
        self.used(tenant, pool)
            .saturating_sub(self.quota(tenant, pool))
    }

    /// Whether the tenant may reclaim quota anywhere: it is below its quota on a pool where
    /// another tenant borrows.
    pub fn may_reclaim(&self, tenant: usize) -> bool {
        (0..self.roster.capacity.len())
            .map(|p| PoolId(p as u16))
            .any(|pool| {
                self.under_quota(tenant, pool)
                    && (0..self.len())
                        .any(|other| other != tenant && self.borrowed(other, pool) > 0)
            })
    }

    /// Whether the tenant is below its quota on a pool (and so may reclaim it).
    pub fn under_quota(&self, tenant: usize, pool: PoolId) -> bool {
        self.used(tenant, pool) < self.quota(tenant, pool)
    }

    /// Whether `milli` more milli-GPUs for `tenant` on `pool` would leave it borrowing
    /// while another shared tenant is below its quota there with a job waiting for that
    /// pool (`waiting(owner)`): room the owner may reclaim at once. An owner with nothing
    /// waiting there reclaims only once it submits, as from any borrower.
    pub fn reclaimable(
        &self,
        tenant: usize,
        pool: PoolId,
        milli: u64,
        waiting: impl Fn(usize) -> bool,
    ) -> bool {
        let used = self.used(tenant, pool).saturating_add(milli);
        used > self.quota(tenant, pool)
            && (0..self.len()).any(|owner| {
                owner != tenant
                    && self.roster.modes[owner] == TenantMode::Shared
                    && self.under_quota(owner, pool)
                    && waiting(owner)
            })
    }

    /// The GPU pools whose isolated tenants' quotas add up to more than their GPUs: those
    /// quotas cannot all be held at once, so an isolated tenant within its quota may wait.
    /// A pool without GPUs (a model no node carries) is left out.
    pub fn isolated_oversubscription(&self, cluster: &ClusterSpec) -> Vec<Oversubscribed> {
        let gpus = |milli: u64| milli / u64::from(MILLI_PER_GPU);
        (0..self.roster.capacity.len())
            .filter(|&p| {
                self.roster.capacity[p] > 0
                    && self.roster.isolated_quota[p] > self.roster.capacity[p]
            })
            .map(|p| Oversubscribed {
                gpu_model: (cluster.pools[p].gpu_model.clone()).unwrap_or_default(),
                quotas: (0..self.len())
                    .filter(|&t| {
                        self.roster.modes[t] == TenantMode::Isolated && self.roster.quota[t][p] > 0
                    })
                    .map(|t| (self.roster.names[t].clone(), gpus(self.roster.quota[t][p])))
                    .collect(),
                quota_gpus: gpus(self.roster.isolated_quota[p]),
                gpus: gpus(self.roster.capacity[p]),
            })
            .collect()
    }

    /// The tenant's use against its weighted quota share: who is furthest below its share
    /// is served first. A quota counts up to its pool's GPUs (past them it grants nothing,
    /// and a model whose nodes are gone would put its tenant first for nothing); a tenant
    /// without quota counts its use against one GPU.
    pub fn share(&self, tenant: usize) -> f64 {
        let used: u64 = self.used[tenant].iter().sum();
        let quota: u64 = (self.roster.quota[tenant].iter())
            .zip(&self.roster.capacity)
            .map(|(&quota, &capacity)| quota.min(capacity))
            .sum();
        used as f64 / quota.max(u64::from(MILLI_PER_GPU)) as f64 / self.roster.weights[tenant]
    }

    /// Milli-GPUs in use and borrowed by a tenant, over all pools.
    pub fn totals(&self, tenant: usize) -> (u64, u64) {
        let used = self.used[tenant].iter().sum();
        let borrowed = (0..self.roster.capacity.len())
            .map(|p| self.used[tenant][p].saturating_sub(self.roster.quota[tenant][p]))
            .sum();
        (used, borrowed)
    }
}

/// A GPU pool whose isolated quotas add up past its GPUs; displayed as a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oversubscribed {
    pub gpu_model: String,
    /// The isolated tenants with a quota there, and their quotas in GPUs.
    pub quotas: Vec<(String, u64)>,
    /// Their sum.
    pub quota_gpus: u64,
    /// The pool's GPUs.
    pub gpus: u64,
}

impl fmt::Display for Oversubscribed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quotas: Vec<String> = (self.quotas.iter())
            .map(|(tenant, gpus)| format!("{tenant} {gpus}"))
            .collect();
        write!(
            f,
            "the isolated quotas for {} add up to {} GPUs ({}), more than the {} GPUs its \
             nodes have: an isolated tenant within its quota may wait",
            self.gpu_model,
            self.quota_gpus,
            quotas.join(", "),
            self.gpus
        )
    }
}

/// Milli-GPUs of each pool of the cluster.
fn pool_capacities(cluster: &ClusterSpec) -> Vec<u64> {
    cluster
        .pools
        .iter()
        .map(|p| {
            p.nodes
                .iter()
                .map(|&n| cluster.node(n).gpu_capacity_milli())
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::synthetic::{default_cluster, default_tenants};

    #[test]
    fn no_more_tenants_than_a_job_can_name() {
        let cluster = default_cluster();
        let named = |count: usize| -> Vec<TenantConfig> {
            (0..count)
                .map(|i| TenantConfig {
                    name: format!("t{i}"),
                    mode: TenantMode::Shared,
                    weight: 1.0,
                    quota: Default::default(),
                })
                .collect()
        };
        let most = Tenants::resolve(&named(MAX_TENANTS - 1), &cluster).unwrap();
        assert_eq!(most.len(), MAX_TENANTS);
        assert_eq!(
            Tenants::resolve(&named(MAX_TENANTS), &cluster)
                .err()
                .unwrap(),
            "tenant t65535: more than 65536 tenants, the default one included"
        );
    }

    /// Isolated quotas past a pool's GPUs are named, with every isolated tenant holding a
    /// quota there; shared quotas past it are not (borrowing is what they are for).
    #[test]
    fn isolated_quotas_past_a_pools_gpus_are_named() {
        let cluster = default_cluster();
        let pool = &cluster.pools[0];
        let model = pool.gpu_model.clone().unwrap();
        let gpus: u64 = pool
            .nodes
            .iter()
            .map(|&n| cluster.node(n).gpus() as u64)
            .sum();
        let tenant = |name: &str, mode, share: u64| TenantConfig {
            name: name.to_owned(),
            mode,
            weight: 1.0,
            quota: [(model.clone(), (gpus * share / 4) as i64)].into(),
        };
        let within = [
            tenant("a", TenantMode::Isolated, 2),
            tenant("b", TenantMode::Isolated, 2),
            tenant("c", TenantMode::Shared, 4),
        ];
        let tenants = Tenants::resolve(&within, &cluster).unwrap();
        assert!(tenants.isolated_oversubscription(&cluster).is_empty());
        let past = [
            tenant("a", TenantMode::Isolated, 2),
            tenant("b", TenantMode::Isolated, 3),
        ];
        let tenants = Tenants::resolve(&past, &cluster).unwrap();
        let found = tenants.isolated_oversubscription(&cluster);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].to_string(),
            format!(
                "the isolated quotas for {model} add up to {} GPUs (a {}, b {}), more than \
                 the {gpus} GPUs its nodes have: an isolated tenant within its quota may wait",
                gpus * 5 / 4,
                gpus / 2,
                gpus * 3 / 4,
            )
        );
    }

    /// A quota past its pool's GPUs weighs in the share as the pool's GPUs.
    #[test]
    fn a_quota_counts_in_the_share_up_to_its_pools_gpus() {
        let cluster = default_cluster();
        let pool = &cluster.pools[0];
        let model = pool.gpu_model.clone().unwrap();
        let gpus: u64 = (pool.nodes.iter())
            .map(|&n| cluster.node(n).gpus() as u64)
            .sum();
        let tenant = |name: &str, quota: u64| TenantConfig {
            name: name.to_owned(),
            mode: TenantMode::Shared,
            weight: 1.0,
            quota: [(model.clone(), quota as i64)].into(),
        };
        let configs = [tenant("a", gpus), tenant("b", 3 * gpus)];
        let mut tenants = Tenants::resolve(&configs, &cluster).unwrap();
        for t in [1, 2] {
            tenants.charge(t, PoolId(0), (gpus * u64::from(MILLI_PER_GPU) / 2) as i64);
        }
        assert_eq!(tenants.share(1), 0.5);
        assert_eq!(tenants.share(2), 0.5);
    }

    /// `held` is kept by `charge`: after any sequence of charges (an isolated tenant going
    /// past its quota and back, use released below zero) it equals a recount.
    #[test]
    fn charges_keep_the_held_room_as_a_recount_would() {
        let cluster = default_cluster();
        let mut tenants = Tenants::resolve(&default_tenants(&cluster), &cluster).unwrap();
        let isolated = tenants.index("team-research").unwrap();
        assert_eq!(tenants.mode(isolated), TenantMode::Isolated);
        let pool = PoolId(0);
        let quota = tenants.quota(isolated, pool) as i64;
        let charges = [
            (isolated, quota / 2),
            (isolated, quota),
            (0, 3_000),
            (1, 8_000),
            (isolated, -quota),
            (0, -5_000),
            (isolated, -quota),
            (1, -8_000),
        ];
        for (tenant, milli) in charges {
            tenants.charge(tenant, pool, milli);
            let mut recounted = tenants.clone();
            recounted.recount();
            assert_eq!(
                tenants.held, recounted.held,
                "after {milli} to tenant {tenant}"
            );
        }
    }
}
