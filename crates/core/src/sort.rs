//! Stable sorting for cold call sites through one shared instance of the standard library's
//! sort. `slice::sort_by` builds its drift sort, quicksort and small sorts (some 4 KB) once for
//! each element type and comparison closure, so each call site in the daemon had its own copy
//! (BENCHMARKS.md, "Binary size, round three's last cut"). Here the indices of the elements are
//! sorted instead, by one `sort_by` on `usize` that compares through a `&dyn Fn`, and the
//! elements are then moved into that order. The result is the one `slice::sort_by` gives: the
//! sort is stable, so equal elements keep their order. It costs a vector of indices and a call
//! through a pointer per comparison; for lists sorted once per request or at start.

use std::cmp::Ordering;

/// `v.sort_by(cmp)`, stable, through the shared sort.
pub fn sort_by<T>(v: &mut [T], cmp: impl Fn(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let mut order = order_of(v.len(), &|a, b| cmp(&v[a], &v[b]));
    arrange(&mut order, &mut |a, b| v.swap(a, b));
}

/// `v.sort_by_key(key)`, stable, through the shared sort (the key is taken for both elements
/// of each comparison, as `slice::sort_by_key` does).
pub fn sort_by_key<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)));
}

/// `v.sort()`, stable, through the shared sort.
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, T::cmp);
}

/// The indices `0..n` in the order `cmp` puts them, equal ones in their own order.
#[inline(never)]
fn order_of(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

/// Put the elements in `order` (position `i` gets the element that was at `order[i]`) with
/// `swap`, one cycle of the permutation at a time; `order` is used up.
#[inline(never)]
fn arrange(order: &mut [usize], swap: &mut dyn FnMut(usize, usize)) {
    for start in 0..order.len() {
        let mut at = start;
        while order[at] != at {
            let from = order[at];
            order[at] = at;
            if from == start {
                break;
            }
            swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every permutation of a list with repeated keys sorts as `slice::sort_by_key` sorts it.
    #[test]
    fn the_order_is_the_standard_stable_one() {
        let base: Vec<(u8, usize)> = [3, 1, 2, 1, 3, 0, 2]
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, i))
            .collect();
        let mut seed = 7u64;
        for _ in 0..2000 {
            let mut v = base.clone();
            for i in (1..v.len()).rev() {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                v.swap(i, (seed >> 33) as usize % (i + 1));
            }
            let mut expected = v.clone();
            expected.sort_by_key(|e| e.0);
            sort_by_key(&mut v, |e| e.0);
            assert_eq!(v, expected);
        }
        let mut words = vec!["pear", "fig", "apple", "fig", "kiwi"];
        sort(&mut words);
        assert_eq!(words, ["apple", "fig", "fig", "kiwi", "pear"]);
        let mut none: Vec<String> = Vec::new();
        sort(&mut none);
        let mut desc = vec![1, 5, 3];
        sort_by(&mut desc, |a, b| b.cmp(a));
        assert_eq!(desc, [5, 3, 1]);
    }
}
