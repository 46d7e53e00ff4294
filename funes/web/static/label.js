// The label form's filter: show the tools whose name holds the typed text; ticked tools stay in sight.
"use strict";
const filter = document.getElementById("tool-filter");
const options = Array.from(document.querySelectorAll("#tool-list .tool-option"));
const count = document.getElementById("tool-count");
const total = count.textContent;

filter.addEventListener("input", () => {
  const words = filter.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const option of options) {
    const ticked = option.querySelector("input").checked;
    const fits = words.every((w) => option.dataset.name.includes(w));
    option.hidden = !(fits || ticked);
    if (!option.hidden) shown += 1;
  }
  count.textContent = words.length ? `${shown} of ${options.length} tools shown` : total;
});
// Enter in the filter narrows the list; it must not submit the label.
filter.addEventListener("keydown", (event) => { if (event.key === "Enter") event.preventDefault(); });
