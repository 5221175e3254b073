/**
 * Prints the closing `N passed, N failed` line that scripts/test-all.sh counts, like every other SpecLab
 * runner. A test counts as passed only when it ran and met its expectation; anything else that was
 * planned (failed, timed out, interrupted, or never ran because an earlier serial test or the web server
 * failed) counts as failed, since nothing in SpecLab skips. Global errors (the web server did not start)
 * count as one failure when no test failed otherwise.
 */
import type { FullConfig, FullResult, Reporter, Suite, TestCase, TestError, TestResult } from '@playwright/test/reporter';

export default class CountReporter implements Reporter {
  private planned: TestCase[] = [];
  private readonly last = new Map<TestCase, TestResult>();
  private globalErrors = 0;

  printsToStdio(): boolean {
    return true;
  }

  onBegin(_config: FullConfig, suite: Suite): void {
    this.planned = suite.allTests();
  }

  onTestEnd(test: TestCase, result: TestResult): void {
    this.last.set(test, result);
  }

  onError(_error: TestError): void {
    this.globalErrors++;
  }

  onEnd(result: FullResult): void {
    if (process.argv.includes('--list')) return; // `playwright test --list` runs nothing
    const passed = this.planned.filter((t) => this.last.get(t)?.status === t.expectedStatus && t.expectedStatus === 'passed').length;
    let failed = this.planned.length - passed;
    const notRun = this.planned.filter((t) => !this.last.has(t) || this.last.get(t)!.status === 'skipped').length;
    if (failed === 0 && (this.globalErrors > 0 || result.status !== 'passed')) failed = 1;
    if (notRun > 0) console.log(`e2e: ${notRun} planned test(s) did not run (counted as failed)`);
    console.log(`${passed} passed, ${failed} failed`);
  }
}
