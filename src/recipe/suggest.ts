/**
 * "Did you mean …?" suggestions for misspelt keys, enum values and references.
 * @module
 */

/** Levenshtein distance between two strings (insertions, deletions and substitutions cost 1). */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The candidate closest to `word`, or undefined when none is close enough. A candidate is close
 * when its case-insensitive edit distance is at most a third of the longer word (at least 2), or
 * when one of them ends with the other after an underscore (`agent_config_path` →
 * `nexau_agent_config_path`), which only a candidate within 2 edits beats. Ties go to the earlier
 * candidate.
 */
export function didYouMean(word: string, candidates: Iterable<string>): string | undefined {
  const lower = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const other = candidate.toLowerCase();
    if (other === lower) return candidate;
    const limit = Math.max(2, Math.floor(Math.max(lower.length, other.length) / 3));
    const distance = editDistance(lower, other);
    const affix = other.endsWith(`_${lower}`) || lower.endsWith(`_${other}`);
    // An underscore affix is a stronger hint than a loose edit distance: only typos of at most 2 edits beat it.
    const score = affix ? Math.min(distance, 2.5) : distance <= limit ? distance : Infinity;
    if (score < bestDistance) {
      best = candidate;
      bestDistance = score;
    }
  }
  return best;
}
