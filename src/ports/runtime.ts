/** The runtimes SpecLab runs in: Node with Dawn, Deno, and a browser tab. */
export type RuntimeName = 'node' | 'deno' | 'browser';
