// The extraction page as a person uses it, in headless Chromium on SwiftShader: paste a message,
// press the button, read the form. The tiny random-weight model (tiny-model.mjs) writes nonsense,
// so the test holds the page to what the constraint guarantees: the JSON it shows parses and
// validates under the form's schema (ajv, not fuselm), and every form field shows that JSON's
// value; an answer cut by max tokens and a file that is no model are shown as errors, with the
// form left empty. Fails on a console error or an uncaught exception / unhandled rejection.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Ajv2020 from "ajv/dist/2020.js";
import { launch } from "./chromium.mjs";
import { assertNoProblems, ensureTinyModel, expectState, openPage, screenshot, startServer, waitState } from "./page.mjs";

// The page's schema, written out again: the test checks the page shows this one, then validates
// with it, so a page whose schema drifted fails here.
const schema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 32 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    email: { type: "string", pattern: "^[A-Za-z0-9._%+-]{1,20}@[A-Za-z0-9-]{1,20}\\.[A-Za-z]{2,6}$" },
    tickets: { type: "integer", minimum: 1, maximum: 10 },
    day: { enum: ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"] },
  },
  required: ["name", "age", "email", "tickets", "day"],
  additionalProperties: false,
};
const fields = Object.keys(schema.properties);
const validate = new Ajv2020({ strict: true }).compile(schema);

let server, base, tiny;
before(async () => {
  tiny = ensureTinyModel();
  ({ server, base } = await startServer());
});
after(() => server?.close());

const formValues = (page) =>
  page.evaluate((names) => Object.fromEntries(names.map((f) => [f, document.getElementById(`field-${f}`).value])), fields);

test("extract: a pasted message fills the form with the model's JSON, valid under the schema; cut and failed answers are errors", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await openPage(browser, `${base}/examples/site/extract.html?model=${encodeURIComponent(tiny)}`);
    assert.equal(await page.evaluate(() => document.body.dataset.state), "idle");
    assert.deepEqual(JSON.parse(await page.textContent("#schema")), schema, "the page's schema");
    assert.deepEqual(await formValues(page), Object.fromEntries(fields.map((f) => [f, ""])), "the form starts empty");

    // Keys and punctuation are forced; the strings run to their maxLength on random weights
    // (about 160 tokens in all), and the constraint ends the answer where it is complete.
    await page.fill("#text", "Hi, I'm Ana Silva, 34, email ana@example.com, I'd like 2 tickets for Friday.");
    await page.fill("#max-tokens", "240");
    await page.click("#extract");
    await expectState(page, "done");
    const raw = await page.textContent("#raw");
    const booking = JSON.parse(raw);
    assert.ok(validate(booking), `${raw}: ${JSON.stringify(validate.errors)}`);
    assert.deepEqual(await formValues(page), Object.fromEntries(fields.map((f) => [f, String(booking[f])])), "the form shows the model's values");
    assert.equal(await page.locator("#booking .filled").count(), fields.length);
    assert.match(await page.textContent("#finish"), /^finish_reason "stop" · \d+ tokens in [\d.]+ s/);
    assert.match(await page.textContent("#status"), /^filled 5 fields/);
    assert.equal(await page.isHidden("#error"), true);
    await screenshot(page, "extract");

    // Cut by max tokens: an error that says so, the partial JSON, and no stale values in the form.
    await page.fill("#max-tokens", "12");
    await page.click("#extract");
    assert.equal(await waitState(page, ["error", "done"]), "error");
    assert.equal(await page.evaluate(() => document.body.dataset.errorKind), "length");
    assert.match(await page.textContent("#error"), /^Extraction failed — length: the answer was cut at max tokens \(12\)/);
    const partial = await page.textContent("#raw");
    assert.match(partial, /^\{/);
    assert.throws(() => JSON.parse(partial), SyntaxError, `incomplete: ${partial}`);
    assert.match(await page.textContent("#finish"), /^finish_reason "length" · 12 tokens/);
    assert.deepEqual(await formValues(page), Object.fromEntries(fields.map((f) => [f, ""])), "a failed extraction leaves the form empty");
    await screenshot(page, "extract-length");

    // A file that is not a model: the typed error, shown readably.
    await page.fill("#model", "/README.md");
    await page.click("#extract");
    assert.equal(await waitState(page, ["error", "done"]), "error");
    assert.equal(await page.evaluate(() => document.body.dataset.errorKind), "invalid-model");
    assert.match(await page.textContent("#error"), /^Extraction failed — invalid-model: \S/);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});
