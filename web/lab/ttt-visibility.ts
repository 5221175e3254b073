/**
 * The TTT attention mask as a grid: row (k, i) is the query of TTT step k at position i, column
 * (j, p) the key of step j at position p. Visible when j = 0 and p ≤ i (causal over the sequence the
 * target saw) or 1 ≤ j ≤ k and p = i (the draft's own earlier predictions at that position), the
 * scheme of src/reference/eagle3.ts and shaders/attention/ttt_*.
 */
export function tttVisible(k: number, i: number, j: number, p: number): boolean {
  return (j === 0 && p <= i) || (j >= 1 && j <= k && p === i);
}

export function renderTttVisibility(container: HTMLElement, tttLength: number, positions = 6): void {
  const n = tttLength * positions;
  container.style.gridTemplateColumns = `repeat(${n}, auto)`;
  const cells: string[] = [];
  for (let k = 0; k < tttLength; k++) {
    for (let i = 0; i < positions; i++) {
      for (let j = 0; j < tttLength; j++) {
        for (let p = 0; p < positions; p++) {
          const cls = [tttVisible(k, i, j, p) ? 'visible' : '', p === 0 && j > 0 ? 'step-start' : ''].filter(Boolean).join(' ');
          cells.push(`<span class="${cls}" title="query step ${k} pos ${i} → key step ${j} pos ${p}"></span>`);
        }
      }
    }
  }
  container.innerHTML = cells.join('');
  container.setAttribute(
    'aria-label',
    `TTT attention visibility for ${tttLength} steps over ${positions} positions: ${cells.filter((c) => c.includes('visible')).length} of ${n * n} query-key pairs visible`,
  );
}
