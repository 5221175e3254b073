/**
 * The export confirmation: the worker's export files zipped (./export-zip.ts), then a dialog naming
 * the zip and every file inside with its size; only Download saves it.
 */
import { formatBytes } from '../../src/util/bytes.ts';
import { makeExportZip } from './export-zip.ts';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

let pendingExport: { blob: Blob; name: string } | undefined;
export async function offerExport(files: { name: string; bytes: Uint8Array }[], step: number): Promise<void> {
  const { blob, entries } = await makeExportZip(files);
  const name = `speclab-eagle3-draft-step${step}.zip`;
  pendingExport = { blob, name };
  const dialog = $<HTMLDialogElement>('export-dialog');
  dialog.dataset.file = name;
  $('export-summary').textContent = `${name} (${formatBytes(blob.size)}), the draft after step ${step}, holds:`;
  $<HTMLTableElement>('export-entries').innerHTML =
    `<thead><tr><th scope="col">file</th><th scope="col">size</th></tr></thead><tbody>${entries.map((e) => `<tr><th scope="row">${e.name}</th><td>${formatBytes(e.bytes)}</td></tr>`).join('')}</tbody>`;
  dialog.showModal();
  $('export-confirm').focus();
}
$('export-confirm').addEventListener('click', () => {
  const dialog = $<HTMLDialogElement>('export-dialog');
  if (pendingExport) {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(pendingExport.blob);
    a.download = pendingExport.name;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    $('import-status').dataset.state = 'exported';
    $('import-status').textContent = `Downloaded ${pendingExport.name}.`;
  }
  pendingExport = undefined;
  dialog.close();
});
$('export-cancel').addEventListener('click', () => {
  pendingExport = undefined;
  $<HTMLDialogElement>('export-dialog').close();
});
