// The login link (`jobledger serve --token-file`) carries a one-time login code in the URL's
// fragment, which the browser never sends to the server: move it into the form, drop it
// from the address bar and the history, and post the form.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const match = /^#code=(.+)$/.exec(window.location.hash);
  if (!match) return;
  history.replaceState(null, "", window.location.pathname);
  const form = document.getElementById("login");
  form.elements.code.value = decodeURIComponent(match[1]);
  form.submit();
});
