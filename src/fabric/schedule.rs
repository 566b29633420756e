//! Which endpoints measure each other, round by round. In a round every
//! endpoint is in at most one pair, so no NIC is measured twice at once,
//! and a round takes as long as its slowest pair.
//!
//! - `all`: a round-robin tournament by the circle method, N−1 rounds for
//!   N even and N for N odd (one endpoint sits each round out), every pair
//!   exactly once; computed round by round, nothing of size N² is stored.
//! - `ring`: each endpoint with the next (the last with the first): N pairs
//!   in 2 rounds for N even, 3 for N odd. It finds a bad endpoint (both
//!   its pairs suffer) but not a bad pair of healthy ones.
//! - `random:K`: each endpoint with at least min(K, N−1) partners, drawn
//!   from a seed (so a run repeats): the circulant pairs (π(i), π(i+k)),
//!   k = 1..=⌈K/2⌉, of a seeded permutation π, in at most 2Δ−1 rounds (Δ:
//!   partners per endpoint) by first-fit colouring.

/// Which pairs `--pairs` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pairs {
    /// Every pair (a round-robin tournament).
    All,
    /// Each endpoint with the next one, the last with the first.
    Ring,
    /// `partners` partners per endpoint, drawn from `seed`.
    Random { partners: u32, seed: u64 },
}

impl Pairs {
    /// `all`, `ring` or `random:K`; the error names what is wrong.
    pub fn parse(text: &str, seed: u64) -> Result<Pairs, String> {
        match text {
            "all" => Ok(Pairs::All),
            "ring" => Ok(Pairs::Ring),
            _ => match text.strip_prefix("random:") {
                Some(k) => match k.parse::<u32>() {
                    Ok(partners) if partners >= 1 => Ok(Pairs::Random { partners, seed }),
                    _ => Err(format!(
                        "--pairs '{text}': K must be a whole number of partners per host, at least 1, e.g. random:3"
                    )),
                },
                None => Err(format!(
                    "--pairs '{text}': expected all, ring or random:K"
                )),
            },
        }
    }
}

/// The rounds for `n` endpoints.
#[derive(Debug, Clone)]
pub struct Schedule {
    n: u32,
    what: String,
    /// `None` for `all` (computed per round), else every round's pairs.
    listed: Option<Vec<Vec<(u32, u32)>>>,
}

/// splitmix64: a small, well-mixed generator, enough to shuffle hosts.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// First-fit edge colouring: each pair goes in the first round in which
/// neither endpoint is busy.
fn colour(n: u32, edges: &[(u32, u32)]) -> Vec<Vec<(u32, u32)>> {
    let mut rounds: Vec<Vec<(u32, u32)>> = Vec::new();
    // busy[r] as a bitset over endpoints.
    let words = (n as usize).div_ceil(64);
    let mut busy: Vec<Vec<u64>> = Vec::new();
    for &(a, b) in edges {
        let free = |bits: &Vec<u64>| {
            bits[a as usize / 64] & (1 << (a % 64)) == 0
                && bits[b as usize / 64] & (1 << (b % 64)) == 0
        };
        let r = match busy.iter().position(free) {
            Some(r) => r,
            None => {
                busy.push(vec![0; words]);
                rounds.push(Vec::new());
                busy.len() - 1
            }
        };
        busy[r][a as usize / 64] |= 1 << (a % 64);
        busy[r][b as usize / 64] |= 1 << (b % 64);
        rounds[r].push((a.min(b), a.max(b)));
    }
    rounds
}

impl Schedule {
    pub fn new(n: u32, pairs: &Pairs) -> Schedule {
        let every = |n: u32| Schedule {
            n,
            what: format!(
                "every pair of {n} endpoints: {} pairs in {} rounds",
                u64::from(n) * u64::from(n.saturating_sub(1)) / 2,
                circle_rounds(n)
            ),
            listed: None,
        };
        let listed = |n: u32, what: String, edges: Vec<(u32, u32)>| {
            let rounds = colour(n, &edges);
            Schedule {
                n,
                what: format!(
                    "{what}: {} pairs in {} rounds (not every pair)",
                    edges.len(),
                    rounds.len()
                ),
                listed: Some(rounds),
            }
        };
        match pairs {
            Pairs::All => every(n),
            Pairs::Ring if n <= 3 => every(n),
            Pairs::Ring => listed(
                n,
                "each endpoint with its two ring neighbours".into(),
                (0..n).map(|i| (i, (i + 1) % n)).collect(),
            ),
            Pairs::Random { partners, .. } if *partners >= n.saturating_sub(1) => every(n),
            Pairs::Random { partners, seed } => {
                let mut state = *seed;
                let mut perm: Vec<u32> = (0..n).collect();
                for i in (1..n as usize).rev() {
                    let j = (splitmix(&mut state) % (i as u64 + 1)) as usize;
                    perm.swap(i, j);
                }
                let mut edges = Vec::new();
                for k in 1..=partners.div_ceil(2) {
                    for i in 0..n {
                        // Offset n/2 of an even n pairs each endpoint once: its
                        // second half would repeat the first.
                        if 2 * k == n && i >= n / 2 {
                            continue;
                        }
                        edges.push((perm[i as usize], perm[((i + k) % n) as usize]));
                    }
                }
                listed(
                    n,
                    format!("each endpoint with at least {partners} random partners (seed {seed})"),
                    edges,
                )
            }
        }
    }

    pub fn endpoints(&self) -> u32 {
        self.n
    }

    pub fn rounds(&self) -> u32 {
        match &self.listed {
            Some(r) => r.len() as u32,
            None => circle_rounds(self.n),
        }
    }

    /// Round `r`'s pairs (a, b), a < b, no endpoint twice.
    pub fn round(&self, r: u32) -> Vec<(u32, u32)> {
        match &self.listed {
            Some(rounds) => rounds.get(r as usize).cloned().unwrap_or_default(),
            None => circle_round(self.n, r),
        }
    }

    /// How many pairs over all rounds.
    pub fn pairs(&self) -> u64 {
        match &self.listed {
            Some(r) => r.iter().map(|x| x.len() as u64).sum(),
            None => u64::from(self.n) * u64::from(self.n.saturating_sub(1)) / 2,
        }
    }

    /// One line: what this schedule covers and what it leaves out.
    pub fn covers(&self) -> String {
        self.what.clone()
    }
}

/// N−1 rounds for N even, N for N odd (none for fewer than 2).
fn circle_rounds(n: u32) -> u32 {
    match n {
        0 | 1 => 0,
        n if n % 2 == 0 => n - 1,
        n => n,
    }
}

/// The circle method: with m = N rounded up to even, endpoint m−1 stays put
/// and the others turn; in round r, slot 0 is r and slot i pairs r+i with
/// r−i (mod m−1). An odd N's phantom endpoint m−1 marks who sits out.
fn circle_round(n: u32, r: u32) -> Vec<(u32, u32)> {
    if r >= circle_rounds(n) {
        return Vec::new();
    }
    let m = n + n % 2;
    let turn = m - 1;
    let mut out = Vec::with_capacity(m as usize / 2);
    let fixed = m - 1;
    if fixed < n {
        out.push((r.min(fixed), r.max(fixed)));
    }
    for i in 1..m / 2 {
        let a = (r + i) % turn;
        let b = (r + turn - i) % turn;
        out.push((a.min(b), a.max(b)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks one schedule: no endpoint twice in a round, no pair twice,
    /// a < b < n; returns how many pairs there were. `seen` is a bitset of
    /// n² bits reused between calls, `stamp` a per-endpoint round stamp.
    fn check(s: &Schedule, seen: &mut Vec<u64>, stamp: &mut Vec<u32>) -> u64 {
        let n = s.endpoints() as usize;
        seen.clear();
        seen.resize((n * n).div_ceil(64), 0);
        stamp.clear();
        stamp.resize(n, u32::MAX);
        let mut count = 0;
        for r in 0..s.rounds() {
            for (a, b) in s.round(r) {
                let (a, b) = (a as usize, b as usize);
                assert!(a < b && b < n, "n={n} round {r}: ({a},{b})");
                for x in [a, b] {
                    assert_ne!(stamp[x], r, "n={n}: endpoint {x} twice in round {r}");
                    stamp[x] = r;
                }
                let bit = a * n + b;
                assert_eq!(
                    seen[bit / 64] & (1 << (bit % 64)),
                    0,
                    "n={n}: ({a},{b}) twice"
                );
                seen[bit / 64] |= 1 << (bit % 64);
                count += 1;
            }
        }
        count
    }

    /// All of `ns` over two threads, each with its own bitset. A pair
    /// count of n(n−1)/2 with no pair twice means every pair is there.
    fn check_all(ns: &[u32]) {
        std::thread::scope(|s| {
            for half in 0..2 {
                s.spawn(move || {
                    let (mut seen, mut stamp) = (Vec::new(), Vec::new());
                    for &n in ns.iter().skip(half).step_by(2) {
                        let sch = Schedule::new(n, &Pairs::All);
                        let want = match n {
                            0 | 1 => 0,
                            n if n % 2 == 0 => n - 1,
                            n => n,
                        };
                        assert_eq!(sch.rounds(), want, "n={n}");
                        let pairs = check(&sch, &mut seen, &mut stamp);
                        assert_eq!(
                            pairs,
                            u64::from(n) * u64::from(n.saturating_sub(1)) / 2,
                            "n={n}"
                        );
                        assert_eq!(pairs, sch.pairs());
                    }
                });
            }
        });
    }

    #[test]
    fn all_pairs_each_once_no_endpoint_twice_a_round_for_every_n_to_1024_and_large_ones() {
        // Every n to 1024, and large ones of both parities up to 4096: a few
        // seconds in the debug profile. The test below covers every n to 4096.
        let ns: Vec<u32> = (1..=1024)
            .chain([1025, 1536, 2047, 2048, 3001, 4095, 4096])
            .collect();
        check_all(&ns);
    }

    /// Every n from 1 to 4096: ~1.1e10 pair checks, about 100 s in the debug
    /// profile on two cores, so it is run on demand:
    /// `cargo test --release --lib -- --ignored fabric::schedule`.
    #[test]
    #[ignore]
    fn all_pairs_for_every_n_up_to_4096() {
        let ns: Vec<u32> = (1..=4096).collect();
        check_all(&ns);
    }

    fn degrees(s: &Schedule) -> Vec<u32> {
        let mut d = vec![0; s.endpoints() as usize];
        for r in 0..s.rounds() {
            for (a, b) in s.round(r) {
                d[a as usize] += 1;
                d[b as usize] += 1;
            }
        }
        d
    }

    #[test]
    fn ring_and_random_cover_every_endpoint_within_their_round_bounds() {
        let (mut seen, mut stamp) = (Vec::new(), Vec::new());
        let ns: Vec<u32> = (1..=300).chain([1024, 4096]).collect();
        for &n in &ns {
            let ring = Schedule::new(n, &Pairs::Ring);
            check(&ring, &mut seen, &mut stamp);
            if n >= 4 {
                assert_eq!(ring.rounds(), if n % 2 == 0 { 2 } else { 3 }, "ring n={n}");
                assert!(degrees(&ring).iter().all(|&d| d == 2), "ring n={n}");
            }
            for k in [1u32, 2, 3, 5, 8] {
                for seed in [1u64, 7] {
                    let p = Pairs::Random { partners: k, seed };
                    let s = Schedule::new(n, &p);
                    check(&s, &mut seen, &mut stamp);
                    let want = k.min(n.saturating_sub(1));
                    let d = degrees(&s);
                    assert!(d.iter().all(|&x| x >= want), "random:{k} n={n}: {d:?}");
                    let delta = d.iter().copied().max().unwrap_or(0);
                    assert!(
                        s.rounds()
                            <= (2 * delta)
                                .saturating_sub(1)
                                .max(circle_rounds(n).min(s.rounds())),
                        "random:{k} n={n}: {} rounds",
                        s.rounds()
                    );
                    let again = Schedule::new(n, &p);
                    assert_eq!(
                        (0..s.rounds()).map(|r| s.round(r)).collect::<Vec<_>>(),
                        (0..again.rounds())
                            .map(|r| again.round(r))
                            .collect::<Vec<_>>(),
                        "the same seed draws the same schedule"
                    );
                }
            }
        }
        let a = Schedule::new(
            64,
            &Pairs::Random {
                partners: 3,
                seed: 1,
            },
        );
        let b = Schedule::new(
            64,
            &Pairs::Random {
                partners: 3,
                seed: 2,
            },
        );
        assert_ne!(a.round(0), b.round(0), "another seed, other partners");
    }

    #[test]
    fn pairs_parse_and_refuse_in_one_line() {
        assert_eq!(Pairs::parse("all", 1), Ok(Pairs::All));
        assert_eq!(Pairs::parse("ring", 1), Ok(Pairs::Ring));
        assert_eq!(
            Pairs::parse("random:3", 9),
            Ok(Pairs::Random {
                partners: 3,
                seed: 9
            })
        );
        for bad in ["random:x", "random:0", "random:", "some"] {
            let e = Pairs::parse(bad, 1).unwrap_err();
            assert!(e.starts_with(&format!("--pairs '{bad}': ")), "{e}");
        }
        assert_eq!(
            Schedule::new(64, &Pairs::All).covers(),
            "every pair of 64 endpoints: 2016 pairs in 63 rounds"
        );
        assert_eq!(
            Schedule::new(64, &Pairs::Ring).covers(),
            "each endpoint with its two ring neighbours: 64 pairs in 2 rounds (not every pair)"
        );
    }
}
