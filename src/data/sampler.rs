//! Data room: batch samplers. Training draws each step's example indices through one of these.
//!
//! - [`PoissonSampler`]: every example independently with probability `sample_rate` (q); the
//!   batch size is Binomial(n, q), possibly 0. This is the sampling the subsampled-Gaussian
//!   accountants assume (Abadi et al. 2016; Mironov et al. 2019). Cost O(batch) per step, by
//!   jumping over Geometric(q) gaps instead of flipping n coins.
//! - [`CyclicPoissonSampler`]: b-min-separated Poisson sampling for banded matrix
//!   factorization: each example in one of b groups, step t Poisson-samples group t mod b.
//! - [`FixedOrderSampler`]: one permutation cut into batches visited in the same order every
//!   epoch (multi-epoch participation without amplification).
//! - [`BallsInBinsSampler`]: each epoch every example in exactly one of t batches, chosen
//!   uniformly and independently (random allocation; batch sizes Binomial(n, 1/t)).
//! - [`ShuffleSampler`]: a fresh uniform permutation each epoch cut into batches of exactly
//!   `batch_size` (the remainder of an epoch, n mod B examples, is dropped).
//! - [`FixedSizeSampler`]: each step an independent uniform subset of exactly `batch_size`
//!   examples, without replacement within the step (the sampling of Kuru et al., Sec. 2).
//!
//! Every sampler reports [`Sampler::expected_batch_size`], the divisor of the noisy sum (never
//! the realised size). Indices within a batch are returned sorted ascending. Samplers take the
//! RNG as an argument and own no randomness; they must not know of models or privacy.

use rand::Rng;
use rand::seq::SliceRandom;

use super::error::DataError;

/// Poisson sampling with rate `sample_rate` over `n` examples.
#[derive(Debug, Clone, PartialEq)]
pub struct PoissonSampler {
    n: usize,
    sample_rate: f64,
    /// ln(1 − q), the denominator of the geometric gap; −∞ when q = 1.
    ln_miss: f64,
}

impl PoissonSampler {
    /// A Poisson sampler; `sample_rate` must be in [0, 1].
    pub fn new(n: usize, sample_rate: f64) -> Result<Self, DataError> {
        if !(0.0..=1.0).contains(&sample_rate) {
            return Err(DataError::InvalidParameter {
                name: "sample_rate",
                expected: "a number in [0, 1]".to_string(),
                found: sample_rate.to_string(),
            });
        }
        Ok(PoissonSampler {
            n,
            sample_rate,
            ln_miss: (-sample_rate).ln_1p(),
        })
    }

    /// The sampling probability q.
    pub fn sample_rate(&self) -> f64 {
        self.sample_rate
    }

    /// q·n.
    pub fn expected_batch_size(&self) -> f64 {
        self.sample_rate * self.n as f64
    }

    /// Draw the next batch into `out` (cleared first), sorted ascending.
    ///
    /// The gap before the next selected index is G = ⌊ln U / ln(1 − q)⌋ with U uniform on
    /// (0, 1], which is Geometric(q) on {0, 1, ...}: P(G ≥ g) = (1 − q)^g. Successive gaps are
    /// independent, so each index is selected independently with probability q.
    pub fn next_batch_into<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut Vec<usize>) {
        out.clear();
        if self.sample_rate <= 0.0 || self.n == 0 {
            return;
        }
        if self.sample_rate >= 1.0 {
            out.extend(0..self.n);
            return;
        }
        let mut next: usize = 0;
        loop {
            let u: f64 = 1.0 - rng.random::<f64>(); // in (0, 1]
            let gap = (u.ln() / self.ln_miss).floor();
            // Compare in f64 before converting: a gap beyond n ends the batch.
            if gap >= (self.n - next) as f64 {
                return;
            }
            next += gap as usize;
            out.push(next);
            next += 1;
            if next >= self.n {
                return;
            }
        }
    }

    /// Draw the next batch.
    pub fn next_batch<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.expected_batch_size().ceil() as usize + 16);
        self.next_batch_into(rng, &mut out);
        out
    }
}

/// b-min-separated Poisson sampling (Choquette-Choo et al. 2023, "(Amplified) banded matrix
/// factorization", arXiv 2306.08153: "cyclic Poisson" sampling): every example is put once into one of `groups` groups, by an
/// independent uniform draw per example (so adding or removing an example leaves the others'
/// groups alone), and the k-th batch Poisson-samples group k mod `groups` at `sample_rate`. An
/// example therefore takes part at most once in any `groups` consecutive batches, in batches at
/// least `groups` apart. With one group no draw is made and it is [`PoissonSampler`] over all
/// examples, draw for draw.
#[derive(Debug, Clone, PartialEq)]
pub struct CyclicPoissonSampler {
    /// Each group's examples, ascending (empty when there is one group: all examples).
    members: Vec<Vec<usize>>,
    /// One Poisson sampler per group, over its members' positions.
    samplers: Vec<PoissonSampler>,
    n: usize,
    sample_rate: f64,
    /// Batches drawn so far.
    step: u64,
}

impl CyclicPoissonSampler {
    /// Groups drawn from `partition` (not drawn at all for one group); `sample_rate` in [0, 1].
    pub fn new<R: Rng + ?Sized>(
        n: usize,
        groups: usize,
        sample_rate: f64,
        partition: &mut R,
    ) -> Result<Self, DataError> {
        if groups == 0 {
            return Err(DataError::InvalidParameter {
                name: "groups",
                expected: "at least 1".to_string(),
                found: "0".to_string(),
            });
        }
        if groups == 1 {
            return Ok(Self {
                members: Vec::new(),
                samplers: vec![PoissonSampler::new(n, sample_rate)?],
                n,
                sample_rate,
                step: 0,
            });
        }
        let mut members = vec![Vec::with_capacity(n / groups + 1); groups];
        for i in 0..n {
            members[partition.random_range(0..groups)].push(i);
        }
        let samplers = members
            .iter()
            .map(|m| PoissonSampler::new(m.len(), sample_rate))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            members,
            samplers,
            n,
            sample_rate,
            step: 0,
        })
    }

    /// The rate inside a group.
    pub fn sample_rate(&self) -> f64 {
        self.sample_rate
    }

    /// q_group · n / groups.
    pub fn expected_batch_size(&self) -> f64 {
        self.sample_rate * self.n as f64 / self.samplers.len() as f64
    }

    /// Batches drawn so far (the next batch is from group `step mod groups`).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Continue after `step` batches (a resumed run; the groups are drawn again from the same
    /// stream by [`Self::new`]).
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    /// Draw the next batch into `out` (cleared first), sorted ascending.
    pub fn next_batch_into<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut Vec<usize>) {
        let g = (self.step % self.samplers.len() as u64) as usize;
        self.step += 1;
        self.samplers[g].next_batch_into(rng, out);
        if let Some(members) = self.members.get(g) {
            // Positions ascend and so do the members: the batch stays sorted.
            for v in out.iter_mut() {
                *v = members[*v];
            }
        }
    }
}

/// Fixed-order batches: one uniform permutation (drawn once, from the caller's RNG) cut into
/// m = ⌊n / batch_size⌋ batches of exactly `batch_size` examples, visited in the same order every
/// epoch: step t uses batch t mod m. Every example in a batch takes part once per epoch, in steps
/// exactly m apart; the n − m·batch_size examples past the last whole batch are never used. This is
/// the multi-epoch participation of the matrix mechanism without amplification (Choquette-Choo et
/// al. 2022, "Multi-epoch matrix factorization mechanisms for private machine learning").
#[derive(Debug, Clone, PartialEq)]
pub struct FixedOrderSampler {
    /// The batches, each sorted ascending.
    batches: Vec<Vec<usize>>,
    step: u64,
}

impl FixedOrderSampler {
    /// Batches drawn from `permutation`; `1 <= batch_size <= n`.
    pub fn new<R: Rng + ?Sized>(
        n: usize,
        batch_size: usize,
        permutation: &mut R,
    ) -> Result<Self, DataError> {
        if batch_size == 0 || batch_size > n {
            return Err(DataError::InvalidParameter {
                name: "batch_size",
                expected: format!("an integer in 1..={n}"),
                found: batch_size.to_string(),
            });
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(permutation);
        let batches = order
            .chunks_exact(batch_size)
            .map(|c| {
                let mut b = c.to_vec();
                b.sort_unstable();
                b
            })
            .collect();
        Ok(Self { batches, step: 0 })
    }

    /// m, the batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        self.batches.len()
    }

    /// The batch size.
    pub fn expected_batch_size(&self) -> f64 {
        self.batches[0].len() as f64
    }

    /// Continue after `step` batches (a resumed run; the batches are drawn again by [`Self::new`]).
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    /// Draw the next batch into `out` (cleared first), sorted ascending.
    pub fn next_batch_into(&mut self, out: &mut Vec<usize>) {
        let k = (self.step % self.batches.len() as u64) as usize;
        self.step += 1;
        out.clear();
        out.extend_from_slice(&self.batches[k]);
    }
}

/// Balls in bins: at the start of each epoch every example is put in one of `bins` batches,
/// uniformly and independently of the others (Chua et al. 2025, "Balls-and-bins sampling for
/// DP-SGD"); the epoch's steps visit the batches in order. Epoch e's assignment is drawn from its
/// own stream (a key drawn once at construction, stream e), so a resumed run rebuilds it from the
/// step alone.
#[derive(Debug, Clone, PartialEq)]
pub struct BallsInBinsSampler {
    n: usize,
    bins: usize,
    key: [u8; 32],
    step: u64,
    /// The epoch whose assignment `order`/`offsets` hold.
    epoch: Option<u64>,
    /// Examples grouped by batch, ascending within each; batch k is
    /// `order[offsets[k]..offsets[k + 1]]`.
    order: Vec<u32>,
    offsets: Vec<usize>,
}

impl BallsInBinsSampler {
    /// `bins` batches per epoch over `n` examples (1 ≤ bins, n < 2³²); the key comes from `key_rng`.
    pub fn new<R: Rng + ?Sized>(n: usize, bins: usize, key_rng: &mut R) -> Result<Self, DataError> {
        if bins == 0 || u32::try_from(n).is_err() {
            return Err(DataError::InvalidParameter {
                name: "batch_size",
                expected: "at least one batch per epoch over fewer than 2^32 examples".to_string(),
                found: format!("{bins} batches of {n} examples"),
            });
        }
        let mut key = [0u8; 32];
        key_rng.fill_bytes(&mut key);
        Ok(Self {
            n,
            bins,
            key,
            step: 0,
            epoch: None,
            order: Vec::new(),
            offsets: Vec::new(),
        })
    }

    /// t, the batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        self.bins
    }

    /// n / t.
    pub fn expected_batch_size(&self) -> f64 {
        self.n as f64 / self.bins as f64
    }

    /// Continue after `step` batches (a resumed run).
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    fn assign(&mut self, epoch: u64) {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha12Rng::from_seed(self.key);
        rng.set_stream(epoch);
        let bins = self.bins as u32;
        let bin: Vec<u32> = (0..self.n).map(|_| rng.random_range(0..bins)).collect();
        // Counting sort: examples ascending within each batch.
        let mut offsets = vec![0usize; self.bins + 1];
        for &b in &bin {
            offsets[b as usize + 1] += 1;
        }
        for k in 0..self.bins {
            offsets[k + 1] += offsets[k];
        }
        let mut fill = offsets.clone();
        let mut order = vec![0u32; self.n];
        for (i, &b) in bin.iter().enumerate() {
            order[fill[b as usize]] = i as u32;
            fill[b as usize] += 1;
        }
        self.order = order;
        self.offsets = offsets;
        self.epoch = Some(epoch);
    }

    /// Draw the next batch into `out` (cleared first), sorted ascending; may be empty.
    pub fn next_batch_into(&mut self, out: &mut Vec<usize>) {
        let epoch = self.step / self.bins as u64;
        let k = (self.step % self.bins as u64) as usize;
        if self.epoch != Some(epoch) {
            self.assign(epoch);
        }
        self.step += 1;
        out.clear();
        out.extend(
            self.order[self.offsets[k]..self.offsets[k + 1]]
                .iter()
                .map(|&i| i as usize),
        );
    }
}

/// Epoch-wise shuffling with a fixed batch size.
#[derive(Debug, Clone, PartialEq)]
pub struct ShuffleSampler {
    batch_size: usize,
    permutation: Vec<usize>,
    /// Position of the next batch in `permutation`; `None` before the first epoch.
    cursor: Option<usize>,
    epoch: u64,
}

impl ShuffleSampler {
    /// A shuffling sampler over `n` examples; `1 <= batch_size <= n`.
    pub fn new(n: usize, batch_size: usize) -> Result<Self, DataError> {
        if batch_size == 0 || batch_size > n {
            return Err(DataError::InvalidParameter {
                name: "batch_size",
                expected: format!("an integer in 1..={n} (the number of examples)"),
                found: batch_size.to_string(),
            });
        }
        Ok(ShuffleSampler {
            batch_size,
            permutation: (0..n).collect(),
            cursor: None,
            epoch: 0,
        })
    }

    /// The batch size B (every batch has exactly B examples).
    pub fn expected_batch_size(&self) -> f64 {
        self.batch_size as f64
    }

    /// Batches per epoch, ⌊n / B⌋.
    pub fn batches_per_epoch(&self) -> usize {
        self.permutation.len() / self.batch_size
    }

    /// Epochs started so far (1 after the first batch).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Where the sampler is: the current permutation, the position of the next batch in it
    /// (`None` before the first epoch) and the epochs started (a checkpoint saves these).
    pub fn position(&self) -> (&[usize], Option<usize>, u64) {
        (&self.permutation, self.cursor, self.epoch)
    }

    /// Put the sampler back at a position [`position`](Self::position) returned. Refused unless
    /// `permutation` is a permutation of this sampler's n examples and `cursor` lies in it.
    pub fn set_position(
        &mut self,
        permutation: Vec<usize>,
        cursor: Option<usize>,
        epoch: u64,
    ) -> Result<(), String> {
        let n = self.permutation.len();
        if permutation.len() != n {
            return Err(format!(
                "a permutation of {} examples where the data has {n}",
                permutation.len()
            ));
        }
        let mut seen = vec![false; n];
        for &i in &permutation {
            match seen.get_mut(i) {
                Some(s) if !*s => *s = true,
                _ => return Err(format!("index {i} is not part of a permutation of {n}")),
            }
        }
        if cursor.is_some_and(|c| c > n) {
            return Err(format!("batch position {cursor:?} beyond {n} examples"));
        }
        self.permutation = permutation;
        self.cursor = cursor;
        self.epoch = epoch;
        Ok(())
    }

    /// Draw the next batch into `out` (cleared first), sorted ascending. A new permutation is
    /// drawn when the current epoch has fewer than B examples left.
    pub fn next_batch_into<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut Vec<usize>) {
        let b = self.batch_size;
        let start = match self.cursor {
            Some(c) if c + b <= self.permutation.len() => c,
            _ => {
                self.permutation.shuffle(rng);
                self.epoch += 1;
                0
            }
        };
        out.clear();
        out.extend_from_slice(&self.permutation[start..start + b]);
        out.sort_unstable();
        self.cursor = Some(start + b);
    }

    /// Draw the next batch.
    pub fn next_batch<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.batch_size);
        self.next_batch_into(rng, &mut out);
        out
    }
}

/// Each step an independent uniform subset of exactly `batch_size` of `n` examples.
#[derive(Debug, Clone, PartialEq)]
pub struct FixedSizeSampler {
    n: usize,
    batch_size: usize,
}

impl FixedSizeSampler {
    /// A fixed-size sampler; `1 <= batch_size <= n`.
    pub fn new(n: usize, batch_size: usize) -> Result<Self, DataError> {
        if batch_size == 0 || batch_size > n {
            return Err(DataError::InvalidParameter {
                name: "batch_size",
                expected: format!("an integer in 1..={n} (the number of examples)"),
                found: batch_size.to_string(),
            });
        }
        Ok(FixedSizeSampler { n, batch_size })
    }

    /// The batch size B.
    pub fn expected_batch_size(&self) -> f64 {
        self.batch_size as f64
    }

    /// Draw the next batch into `out` (cleared first), sorted ascending. O(B) expected time
    /// (rand's `seq::index::sample`, which picks Floyd's algorithm or a partial shuffle).
    pub fn next_batch_into<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut Vec<usize>) {
        out.clear();
        out.extend(rand::seq::index::sample(rng, self.n, self.batch_size).iter());
        out.sort_unstable();
    }

    /// Draw the next batch.
    pub fn next_batch<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.batch_size);
        self.next_batch_into(rng, &mut out);
        out
    }
}

/// Any of the samplers, chosen at run time (e.g. from a config).
#[derive(Debug, Clone, PartialEq)]
pub enum Sampler {
    Poisson(PoissonSampler),
    CyclicPoisson(CyclicPoissonSampler),
    FixedOrder(FixedOrderSampler),
    BallsInBins(BallsInBinsSampler),
    Shuffle(ShuffleSampler),
    FixedSize(FixedSizeSampler),
}

impl Sampler {
    /// The expected batch size: q·n for Poisson, B otherwise.
    pub fn expected_batch_size(&self) -> f64 {
        match self {
            Sampler::Poisson(s) => s.expected_batch_size(),
            Sampler::CyclicPoisson(s) => s.expected_batch_size(),
            Sampler::FixedOrder(s) => s.expected_batch_size(),
            Sampler::BallsInBins(s) => s.expected_batch_size(),
            Sampler::Shuffle(s) => s.expected_batch_size(),
            Sampler::FixedSize(s) => s.expected_batch_size(),
        }
    }

    /// Draw the next batch into `out` (cleared first), sorted ascending.
    pub fn next_batch_into<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut Vec<usize>) {
        match self {
            Sampler::Poisson(s) => s.next_batch_into(rng, out),
            Sampler::CyclicPoisson(s) => s.next_batch_into(rng, out),
            Sampler::FixedOrder(s) => s.next_batch_into(out),
            Sampler::BallsInBins(s) => s.next_batch_into(out),
            Sampler::Shuffle(s) => s.next_batch_into(rng, out),
            Sampler::FixedSize(s) => s.next_batch_into(rng, out),
        }
    }

    /// Draw the next batch.
    pub fn next_batch<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Vec<usize> {
        let mut out = Vec::new();
        self.next_batch_into(rng, &mut out);
        out
    }
}
