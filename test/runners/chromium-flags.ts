/**
 * What Chromium needs for a WebGPU adapter headless, on SwiftShader's Vulkan, running as root in CI.
 * Shared by the browser test runners and the Playwright configuration.
 */
export const CHROMIUM_WEBGPU_FLAGS = [
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
  '--disable-vulkan-surface',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's Chromium (Playwright cannot download browsers here), or $CHROMIUM. */
export const CHROMIUM_PATH = process.env.CHROMIUM ?? '/usr/bin/chromium';
