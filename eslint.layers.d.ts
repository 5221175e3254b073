// Types of eslint.layers.js, which stays plain JavaScript so eslint.config.js can load it in Node.
export declare const LAYERS: readonly { readonly folder: string; readonly imports: readonly string[] }[];
export declare const OUTSIDE_SRC: readonly { readonly folder: string; readonly imports: readonly string[] }[];
export declare const REFERENCE_USERS: readonly string[];
export declare const SERVER_ONLY_ADAPTERS: readonly string[];
