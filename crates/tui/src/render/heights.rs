//! Heights of the transcript's entries at one width, with prefix sums (a Fenwick tree) so that
//! "which entry holds line N" and "where does entry i start" cost O(log n), and a changed
//! height (the streaming reply) costs O(log n) too.

/// Entry heights (in lines) and their prefix sums.
#[derive(Clone, Debug, Default)]
pub struct Heights {
    values: Vec<usize>,
    /// Fenwick tree, 1-based: `tree[i]` sums `values[i - lowbit(i) .. i]`.
    tree: Vec<usize>,
}

fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

impl Heights {
    /// Build from all heights in O(n).
    pub fn from_values(values: Vec<usize>) -> Self {
        let n = values.len();
        let mut tree = vec![0; n + 1];
        for i in 1..=n {
            tree[i] += values[i - 1];
            let parent = i + lowbit(i);
            if parent <= n {
                tree[parent] += tree[i];
            }
        }
        Self { values, tree }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn get(&self, i: usize) -> usize {
        self.values[i]
    }

    /// Append one height.
    pub fn push(&mut self, height: usize) {
        self.values.push(height);
        let i = self.values.len();
        // tree[i] covers values[i - lowbit(i) .. i]: the new value plus earlier partial sums
        let below = self.prefix(i - 1) - self.prefix(i - lowbit(i));
        self.tree.push(below + height);
    }

    /// Change the height of entry `i`.
    pub fn set(&mut self, i: usize, height: usize) {
        let old = self.values[i];
        if old == height {
            return;
        }
        self.values[i] = height;
        let mut j = i + 1;
        while j < self.tree.len() {
            self.tree[j] = self.tree[j] - old + height;
            j += lowbit(j);
        }
    }

    /// Remove entry `i` (O(n): rebuilds).
    pub fn remove(&mut self, i: usize) {
        let mut values = std::mem::take(&mut self.values);
        values.remove(i);
        *self = Self::from_values(values);
    }

    /// Sum of the heights of entries `0..i`: the first line of entry `i`.
    pub fn prefix(&self, i: usize) -> usize {
        let mut sum = 0;
        let mut j = i;
        while j > 0 {
            sum += self.tree[j];
            j -= lowbit(j);
        }
        sum
    }

    pub fn total(&self) -> usize {
        self.prefix(self.values.len())
    }

    /// The entry holding `line`, if the line exists.
    pub fn find(&self, line: usize) -> Option<usize> {
        let n = self.values.len();
        let mut pos = 0;
        let mut rem = line;
        let mut step = if n == 0 { 0 } else { 1 << n.ilog2() };
        // largest pos with prefix(pos) <= line
        while step > 0 {
            let next = pos + step;
            if next <= n && self.tree[next] <= rem {
                pos = next;
                rem -= self.tree[next];
            }
            step >>= 1;
        }
        (pos < n).then_some(pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sums_and_lookup_match_a_plain_scan() {
        let values: Vec<usize> = (0..37).map(|i| (i * 7) % 5).collect();
        let mut h = Heights::from_values(values[..10].to_vec());
        for &v in &values[10..] {
            h.push(v);
        }
        h.set(3, 9);
        let mut expected = values.clone();
        expected[3] = 9;
        h.remove(20);
        expected.remove(20);
        let mut start = 0;
        for (i, &v) in expected.iter().enumerate() {
            assert_eq!(h.prefix(i), start);
            for line in start..start + v {
                assert_eq!(h.find(line), Some(i));
            }
            start += v;
        }
        assert_eq!(h.total(), start);
        assert_eq!(h.find(start), None);
        assert_eq!(Heights::default().find(0), None);
    }
}
