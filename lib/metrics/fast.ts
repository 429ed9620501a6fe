/**
 * Counters, gauges and histograms cheap enough for the per-request path, exposed through
 * prom-client's registry (which renders the text format). prom-client's own metrics hash the
 * label object on every `inc`/`observe`, even through a cached child; measured at about 1 µs
 * each, a dozen per request. Here a label set is resolved once to a `Series` object that the
 * caller keeps, and updating it is a field write. Each metric implements the `get()` shape
 * prom-client's `Registry.registerMetric` renders.
 */

import type client from "prom-client";

type Labels = Record<string, string>;

interface Rendered {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram";
  aggregator: "sum";
  values: { labels: Labels; value: number; metricName?: string }[];
}

abstract class Family<S> {
  readonly name: string;
  readonly help: string;
  readonly #labelNames: readonly string[];
  protected readonly series = new Map<string, { labels: Labels; s: S }>();

  constructor(
    registry: client.Registry,
    name: string,
    help: string,
    labelNames: readonly string[],
  ) {
    this.name = name;
    this.help = help;
    this.#labelNames = labelNames;
    registry.registerMetric(this as unknown as client.Metric);
  }

  protected abstract create(): S;

  /** The series for these label values (in label-name order); keep it for hot paths. */
  with(...values: string[]): S {
    const key = values.join("\u0000");
    let entry = this.series.get(key);
    if (!entry) {
      const labels: Labels = {};
      this.#labelNames.forEach((n, i) => (labels[n] = values[i] ?? ""));
      entry = { labels, s: this.create() };
      this.series.set(key, entry);
    }
    return entry.s;
  }

  /** Forgets every series. */
  reset(): void {
    this.series.clear();
  }

  /** Every series with its labels, for readers of current values (the status page). */
  entries(): IterableIterator<{ readonly labels: Readonly<Labels>; readonly s: S }> {
    return this.series.values();
  }
}

/** A counter series. */
export class CounterSeries {
  /** Current total. */
  value = 0;
  /** Adds `n` (default 1). */
  inc(n = 1): void {
    this.value += n;
  }
}

/** A gauge series. */
export class GaugeSeries {
  /** Current value. */
  value = 0;
  /** Sets the value. */
  set(v: number): void {
    this.value = v;
  }
  /** Adds 1. */
  inc(): void {
    this.value++;
  }
  /** Subtracts 1. */
  dec(): void {
    this.value--;
  }
}

/** A histogram series with fixed bucket bounds. */
export class HistogramSeries {
  readonly #bounds: readonly number[];
  /** Observations per bucket (not cumulative); the last slot is +Inf. */
  readonly counts: number[];
  /** Sum of observations. */
  sum = 0;
  /** Number of observations. */
  count = 0;
  /** Uses `bounds` (ascending). */
  constructor(bounds: readonly number[]) {
    this.#bounds = bounds;
    this.counts = new Array(bounds.length + 1).fill(0);
  }
  /** The bucket upper bounds (ascending; `counts` has one more slot, +Inf). */
  get bounds(): readonly number[] {
    return this.#bounds;
  }
  /** Records one observation. */
  observe(v: number): void {
    const b = this.#bounds;
    let i = 0;
    while (i < b.length && v > b[i]) i++;
    this.counts[i]++;
    this.sum += v;
    this.count++;
  }
}

/** A labelled counter. */
export class FastCounter extends Family<CounterSeries> {
  protected create(): CounterSeries {
    return new CounterSeries();
  }
  /** prom-client's render hook. */
  get(): Rendered {
    const values = [...this.series.values()].map(({ labels, s }) => ({ labels, value: s.value }));
    return { name: this.name, help: this.help, type: "counter", aggregator: "sum", values };
  }
}

/** A labelled gauge. */
export class FastGauge extends Family<GaugeSeries> {
  protected create(): GaugeSeries {
    return new GaugeSeries();
  }
  /** prom-client's render hook. */
  get(): Rendered {
    const values = [...this.series.values()].map(({ labels, s }) => ({ labels, value: s.value }));
    return { name: this.name, help: this.help, type: "gauge", aggregator: "sum", values };
  }
}

/** A labelled histogram. */
export class FastHistogram extends Family<HistogramSeries> {
  readonly #bounds: readonly number[];
  /** Registers a histogram with bucket upper bounds `bounds`. */
  constructor(
    registry: client.Registry,
    name: string,
    help: string,
    labelNames: readonly string[],
    bounds: readonly number[],
  ) {
    super(registry, name, help, labelNames);
    this.#bounds = bounds;
  }
  protected create(): HistogramSeries {
    return new HistogramSeries(this.#bounds);
  }
  /** prom-client's render hook. */
  get(): Rendered {
    const values: Rendered["values"] = [];
    for (const { labels, s } of this.series.values()) {
      let acc = 0;
      this.#bounds.forEach((le, i) => {
        acc += s.counts[i];
        values.push({
          labels: { ...labels, le: String(le) },
          value: acc,
          metricName: `${this.name}_bucket`,
        });
      });
      acc += s.counts[this.#bounds.length];
      values.push({
        labels: { ...labels, le: "+Inf" },
        value: acc,
        metricName: `${this.name}_bucket`,
      });
      values.push({ labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: "histogram", aggregator: "sum", values };
  }
}
