//! Shards: the I-th of N disjoint parts of a batch, for many machines (Slurm job arrays,
//! Kubernetes Indexed Jobs) working on one input list. Which part a file falls in depends only
//! on its path below the root it was found under (xxh3 of its bytes, modulo N), never on the
//! order or the number of files listed: re-running a shard after files were added or a node
//! failed processes the same files, and with `--skip-existing` only those not done.

use std::path::Path;

use anyhow::{bail, Result};

/// Part `index` (0-based) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;
    /// `I/N`, with I from 1 to N (the I-th of N parts, as Jest and Playwright count).
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("expected I/N with 1 <= I <= N, like 2/8; got {s:?}");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let i: u64 = i.trim().parse().map_err(|_| bad())?;
        let n: u64 = n.trim().parse().map_err(|_| bad())?;
        if i == 0 || i > n {
            return Err(bad());
        }
        Ok(Shard {
            index: i - 1,
            count: n,
        })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index + 1, self.count)
    }
}

/// The bytes a shard is chosen from: the relative path with `/` between its parts, so the
/// same tree gives the same shards on every platform.
fn key(rel: &Path) -> Vec<u8> {
    let mut key = Vec::new();
    for (i, part) in rel.components().enumerate() {
        if i > 0 {
            key.push(b'/');
        }
        key.extend_from_slice(part.as_os_str().as_encoded_bytes());
    }
    key
}

impl Shard {
    /// Whether the file at `rel` (below its root) belongs to this shard.
    pub fn contains(&self, rel: &Path) -> bool {
        xxhash_rust::xxh3::xxh3_64(&key(rel)) % self.count == self.index
    }

    /// The shard a scheduler gave this task, if any, and where it came from: Slurm job arrays
    /// (`SLURM_ARRAY_TASK_ID` modulo the count, so any range of consecutive IDs covers every
    /// part, and re-running some tasks of the array with `--shard-count` gives them the same
    /// parts as before; the count is `SLURM_ARRAY_TASK_COUNT`, else `SLURM_ARRAY_TASK_MAX -
    /// SLURM_ARRAY_TASK_MIN + 1`), or a Kubernetes Indexed Job
    /// (`JOB_COMPLETION_INDEX`, with the count from `count`: `--shard-count` or
    /// `GPUKIT_SHARD_COUNT`, the job's `completions`).
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
        count: Option<u64>,
    ) -> Result<Option<(Shard, &'static str)>> {
        let num = |name: &str| -> Result<Option<u64>> {
            match var(name) {
                None => Ok(None),
                Some(v) => match v.trim().parse() {
                    Ok(n) => Ok(Some(n)),
                    Err(_) => bail!("{name}={v:?} is not a whole number"),
                },
            }
        };
        if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
            let (min, max) = (num("SLURM_ARRAY_TASK_MIN")?, num("SLURM_ARRAY_TASK_MAX")?);
            let step = num("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1);
            if step == 0 {
                bail!("SLURM_ARRAY_TASK_STEP is 0");
            }
            let n = match (count, num("SLURM_ARRAY_TASK_COUNT")?, min, max) {
                (Some(n), ..) | (None, Some(n), ..) => n,
                (None, None, Some(min), Some(max)) if max >= min => (max - min) / step + 1,
                (None, None, Some(min), Some(max)) => bail!(
                    "SLURM_ARRAY_TASK_MAX ({max}) is below SLURM_ARRAY_TASK_MIN ({min}): give --shard-count"
                ),
                (None, None, None, Some(_)) => bail!(
                    "SLURM_ARRAY_TASK_MAX is set but SLURM_ARRAY_TASK_MIN is not (nor SLURM_ARRAY_TASK_COUNT): give --shard-count"
                ),
                (None, None, Some(_), None) => bail!(
                    "SLURM_ARRAY_TASK_MIN is set but SLURM_ARRAY_TASK_MAX is not (nor SLURM_ARRAY_TASK_COUNT): give --shard-count"
                ),
                (None, None, None, None) => bail!(
                    "SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MIN and _MAX are: give --shard-count"
                ),
            };
            if n == 0 {
                bail!("SLURM_ARRAY_TASK_COUNT is 0");
            }
            // A stepped array (--array=0-63:2) numbers its tasks by position, so that every
            // part is someone's: IDs modulo the count would give only every second part.
            let index = if step > 1 {
                let Some(min) = min.filter(|&m| id >= m && (id - m) % step == 0) else {
                    bail!(
                        "SLURM_ARRAY_TASK_ID {id} is not on the array's steps of {step} from SLURM_ARRAY_TASK_MIN: give --shard I/N"
                    );
                };
                (id - min) / step % n
            } else {
                id % n
            };
            return Ok(Some((Shard { index, count: n }, "SLURM_ARRAY_TASK_ID")));
        }
        if let Some(index) = num("JOB_COMPLETION_INDEX")? {
            let Some(n) = count else {
                bail!("JOB_COMPLETION_INDEX is set: give the job's completions as --shard-count or GPUKIT_SHARD_COUNT");
            };
            return Self::checked(Some(index), n, "JOB_COMPLETION_INDEX").map(Some);
        }
        Ok(None)
    }

    fn checked(
        index: Option<u64>,
        count: u64,
        from: &'static str,
    ) -> Result<(Shard, &'static str)> {
        match index {
            Some(index) if index < count => Ok((Shard { index, count }, from)),
            _ => bail!("{from} does not name one of {count} shards"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;

    use super::*;

    fn paths(n: usize) -> Vec<PathBuf> {
        (0..n)
            .map(|i| PathBuf::from(format!("d{}/img_{i:05}.png", i % 7)))
            .collect()
    }

    fn part(files: &[PathBuf], shard: Shard) -> Vec<PathBuf> {
        files
            .iter()
            .filter(|f| shard.contains(f))
            .cloned()
            .collect()
    }

    #[test]
    fn the_parts_cover_every_file_exactly_once() {
        let files = paths(1000);
        for n in [1, 2, 3, 7] {
            let mut seen: HashMap<&PathBuf, u32> = HashMap::new();
            for index in 0..n {
                for f in files
                    .iter()
                    .filter(|f| Shard { index, count: n }.contains(f))
                {
                    *seen.entry(f).or_default() += 1;
                }
            }
            assert_eq!(seen.len(), files.len(), "n = {n}");
            assert!(seen.values().all(|&c| c == 1), "n = {n}");
        }
        // And roughly evenly: no part of 7 has fewer than half its share.
        for index in 0..7 {
            assert!(part(&files, Shard { index, count: 7 }).len() > 1000 / 14);
        }
    }

    #[test]
    fn parts_depend_on_the_path_only_not_the_order_or_the_others() {
        let files = paths(300);
        let mut reversed = files.clone();
        reversed.reverse();
        let more: Vec<PathBuf> = files
            .iter()
            .cloned()
            .chain(paths(600).split_off(300))
            .collect();
        for index in 0..3 {
            let shard = Shard { index, count: 3 };
            let mut a = part(&files, shard);
            let mut b = part(&reversed, shard);
            a.sort();
            b.sort();
            assert_eq!(a, b);
            // Adding files moves none of the old ones to another part.
            let old: Vec<PathBuf> = part(&more, shard)
                .into_iter()
                .filter(|f| files.contains(f))
                .collect();
            let mut old = old;
            old.sort();
            assert_eq!(old, a);
        }
    }

    #[test]
    fn a_path_keeps_its_shard_across_versions_and_platforms() {
        // xxh3 is a fixed specification: these must never change, or a re-run after an
        // upgrade would process other files than the first run.
        let at = |rel: &str| xxhash_rust::xxh3::xxh3_64(&key(Path::new(rel)));
        assert_eq!(
            at(""),
            0x2d06800538d394c2,
            "the xxh3 test vector for no input"
        );
        let mut sub = PathBuf::from("sub");
        sub.push("a.png");
        assert_eq!(at("sub/a.png"), at(sub.to_str().unwrap()));
    }

    #[test]
    fn flags_parse_one_based() {
        assert_eq!("2/8".parse(), Ok(Shard { index: 1, count: 8 }));
        assert_eq!("1/1".parse(), Ok(Shard { index: 0, count: 1 }));
        for bad in ["0/8", "9/8", "2", "a/b", "1/0", "-1/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(Shard { index: 1, count: 8 }.to_string(), "2/8");
    }

    #[test]
    fn schedulers_give_the_shard_through_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let got = Shard::from_env(
            env(&[
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_COUNT", "8"),
            ]),
            None,
        );
        assert_eq!(
            got.unwrap(),
            Some((Shard { index: 3, count: 8 }, "SLURM_ARRAY_TASK_ID"))
        );
        // An array of 1-10 (--array=1-10): the IDs modulo 10 name every part once.
        let slurm = |id: &'static str| {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([
                ("SLURM_ARRAY_TASK_ID", id),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_MAX", "10"),
            ]));
            env(pairs)
        };
        let first = Shard::from_env(slurm("1"), None).unwrap().unwrap().0;
        assert_eq!(
            first,
            Shard {
                index: 1,
                count: 10
            }
        );
        let last = Shard::from_env(slurm("10"), None).unwrap().unwrap().0;
        assert_eq!(
            last,
            Shard {
                index: 0,
                count: 10
            }
        );
        // Re-running task 7 alone (--array=7) with the count given keeps its part.
        let retry = env(&[
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURM_ARRAY_TASK_MIN", "7"),
            ("SLURM_ARRAY_TASK_MAX", "7"),
        ]);
        let again = Shard::from_env(retry, Some(10)).unwrap().unwrap().0;
        assert_eq!(
            again,
            Shard {
                index: 7,
                count: 10
            }
        );
        let k8s = env(&[("JOB_COMPLETION_INDEX", "4")]);
        assert_eq!(
            Shard::from_env(k8s, Some(5)).unwrap().unwrap().0,
            Shard { index: 4, count: 5 }
        );
        assert!(Shard::from_env(k8s, None)
            .unwrap_err()
            .to_string()
            .contains("--shard-count"));
        assert!(Shard::from_env(k8s, Some(4)).is_err());
        assert_eq!(Shard::from_env(env(&[]), Some(4)).unwrap(), None);
        assert!(Shard::from_env(env(&[("SLURM_ARRAY_TASK_ID", "x")]), None).is_err());
    }

    // Issue 24: `--array=0-63:2` gave IDs 0, 2, ..., 62 and 32 parts, and IDs modulo 32 named
    // only the even parts: half the files were never processed.
    #[test]
    fn a_stepped_slurm_array_covers_every_part_once() {
        let env = |pairs: &[(&'static str, &str)]| {
            let pairs: Vec<(&str, String)> =
                pairs.iter().map(|(k, v)| (*k, v.to_string())).collect();
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.clone())
            }
        };
        let mut parts = Vec::new();
        for id in (0..=63).step_by(2) {
            let id = id.to_string();
            let vars = [
                ("SLURM_ARRAY_TASK_ID", id.as_str()),
                ("SLURM_ARRAY_TASK_MIN", "0"),
                ("SLURM_ARRAY_TASK_MAX", "62"),
                ("SLURM_ARRAY_TASK_STEP", "2"),
                ("SLURM_ARRAY_TASK_COUNT", "32"),
            ];
            let shard = Shard::from_env(env(&vars), None).unwrap().unwrap().0;
            assert_eq!(shard.count, 32);
            parts.push(shard.index);
        }
        parts.sort();
        assert_eq!(parts, (0..32).collect::<Vec<u64>>());
        // Without the count, from MIN, MAX and STEP.
        let vars = [
            ("SLURM_ARRAY_TASK_ID", "63"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_MAX", "63"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
        ];
        let shard = Shard::from_env(env(&vars), None).unwrap().unwrap().0;
        assert_eq!(
            shard,
            Shard {
                index: 31,
                count: 32
            }
        );
        // A missing half of the MIN/MAX pair is named.
        let err = |vars: &[(&'static str, &str)]| {
            format!("{:#}", Shard::from_env(env(vars), None).unwrap_err())
        };
        let only_max = err(&[("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_MAX", "9")]);
        assert!(
            only_max.contains("SLURM_ARRAY_TASK_MIN is not"),
            "{only_max}"
        );
        let only_min = err(&[("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_MIN", "1")]);
        assert!(
            only_min.contains("SLURM_ARRAY_TASK_MAX is not"),
            "{only_min}"
        );
    }
}
